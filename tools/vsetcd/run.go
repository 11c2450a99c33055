package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// system is one kind of cluster as the load generator drives it. Its
// methods are safe for concurrent use.
type system interface {
	// newCall makes a call whose identity key is new on target t (an index
	// into --targets): reserve, then record the result. nil means both
	// were committed.
	newCall(ctx context.Context, t int, key string) error
	// replay repeats the finished call of key on target t. nil means it
	// was answered with its recorded result.
	replay(ctx context.Context, t int, key string) error
	close()
}

// options are the flags of vsetcd run.
type options struct {
	System     string
	Targets    []string
	Mode       string
	Clients    int
	Duration   time.Duration
	Warmup     time.Duration
	ArgsSize   int
	ReplayPool int
	Pair       int
	Timeout    time.Duration
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("vsetcd run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var targets string
	fs.StringVar(&o.System, "system", "", "etcd or carmy")
	fs.StringVar(&targets, "targets", "", "host:port of every member or node, comma-separated")
	fs.StringVar(&o.Mode, "mode", "new", "new or replay")
	fs.IntVar(&o.Clients, "clients", 64, "callers, each making one call at a time")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "how long the measured calls run")
	fs.DurationVar(&o.Warmup, "warmup", time.Second, "calls before the measured ones, not counted")
	fs.IntVar(&o.ArgsSize, "args-size", 64, "bytes of random text in each call's arguments")
	fs.IntVar(&o.ReplayPool, "replay-pool", 1000, "mode replay: calls made first, then repeated")
	fs.IntVar(&o.Pair, "pair", 0, "which pair of runs this is (for the table)")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "how long one call may take")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, t := range strings.Split(targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			o.Targets = append(o.Targets, t)
		}
	}
	switch {
	case o.System != "etcd" && o.System != "carmy":
		return o, fmt.Errorf("--system %q: want etcd or carmy", o.System)
	case len(o.Targets) == 0:
		return o, errors.New("--targets is empty")
	case o.Mode != "new" && o.Mode != "replay":
		return o, fmt.Errorf("--mode %q: want new or replay", o.Mode)
	case o.Clients < 1 || o.Duration <= 0 || o.Warmup < 0 || o.ArgsSize < 0 || o.ReplayPool < 1 || o.Timeout <= 0:
		return o, errors.New("--clients, --duration, --replay-pool and --timeout must be positive, --warmup and --args-size not negative")
	}
	return o, nil
}

// result is what vsetcd run prints: one JSON object.
type result struct {
	System     string  `json:"system"`
	Mode       string  `json:"mode"`
	Clients    int     `json:"clients"`
	Pair       int     `json:"pair"`
	Targets    int     `json:"targets"`
	ArgsSize   int     `json:"args_size"`
	Seconds    float64 `json:"seconds"`
	Calls      int64   `json:"calls"`  // answered as expected
	Errors     int64   `json:"errors"` // anything else
	CallsPerS  float64 `json:"calls_per_s"`
	P50MS      float64 `json:"p50_ms"`
	P90MS      float64 `json:"p90_ms"`
	P99MS      float64 `json:"p99_ms"`
	P999MS     float64 `json:"p999_ms"`
	FirstError string  `json:"first_error,omitempty"`
	Started    string  `json:"started"`
}

// runCommand is vsetcd run.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	var rid [6]byte
	if _, err := crand.Read(rid[:]); err != nil {
		return err
	}
	runID := hex.EncodeToString(rid[:])
	var sys system
	if o.System == "etcd" {
		sys, err = newEtcd(o, runID)
	} else {
		sys, err = newCarmy(o, runID)
	}
	if err != nil {
		return err
	}
	defer sys.close()

	d := &driver{o: o, sys: sys, runID: runID}
	if o.Mode == "replay" {
		if err := d.seed(ctx); err != nil {
			return err
		}
	}
	if o.Warmup > 0 {
		d.phase(ctx, time.Now().Add(o.Warmup), false)
	}
	started := time.Now()
	elapsed := d.phase(ctx, started.Add(o.Duration), true)
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	res := d.result(elapsed)
	res.Started = started.UTC().Format(time.RFC3339)
	if res.Calls == 0 {
		return fmt.Errorf("%s %s: no call succeeded (%d errors; the first: %s)", o.System, o.Mode, res.Errors, res.FirstError)
	}
	return json.NewEncoder(stdout).Encode(res)
}

// driver runs the callers of one run.
type driver struct {
	o     options
	sys   system
	runID string
	pool  []string // mode replay: the keys seeded

	mu         sync.Mutex
	latencies  []time.Duration // of the measured calls that succeeded
	calls      int64
	errs       int64
	firstError string
}

// seed makes --replay-pool new calls with --clients callers, for the
// replays to repeat; every one must succeed.
func (d *driver) seed(ctx context.Context) error {
	n := d.o.ReplayPool
	keys := make([]string, n)
	for i := range keys {
		keys[i] = d.runID + "-seed-" + strconv.Itoa(i)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, d.o.Clients)
	for c := range d.o.Clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := d.sys.newCall(ctx, (c+i)%len(d.o.Targets), keys[i]); err != nil {
					errs <- fmt.Errorf("seeding the replay pool: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if ctx.Err() != nil {
		return errors.New("interrupted while seeding")
	}
	d.pool = keys
	return nil
}

// phase runs every caller until deadline and returns how long it took (the
// last call ends after the deadline). record keeps the calls' outcomes and
// latencies.
func (d *driver) phase(ctx context.Context, deadline time.Time, record bool) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	for c := range d.o.Clients {
		wg.Go(func() { d.caller(ctx, c, deadline, record) })
	}
	wg.Wait()
	return time.Since(start)
}

// caller is one caller: a call at a time, to the next target each time.
func (d *driver) caller(ctx context.Context, c int, deadline time.Time, record bool) {
	lat := make([]time.Duration, 0, 4096)
	var calls, errs int64
	var first string
	turn := c
	for seq := 0; ctx.Err() == nil && time.Now().Before(deadline); seq++ {
		t := turn % len(d.o.Targets)
		turn++
		cctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
		start := time.Now()
		var err error
		if d.o.Mode == "replay" {
			err = d.sys.replay(cctx, t, d.pool[(c*7919+seq)%len(d.pool)])
		} else {
			err = d.sys.newCall(cctx, t, d.runID+"-"+strconv.Itoa(c)+"-"+strconv.Itoa(seq)+boolTag(record))
		}
		took := time.Since(start)
		cancel()
		if ctx.Err() != nil {
			break // cut short by an interrupt: not counted
		}
		if err != nil {
			errs++
			if first == "" {
				first = fmt.Sprintf("%s: %v", d.o.Targets[t], err)
			}
			continue
		}
		calls++
		lat = append(lat, took)
	}
	if !record {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.latencies = append(d.latencies, lat...)
	d.calls += calls
	d.errs += errs
	if d.firstError == "" {
		d.firstError = first
	}
}

// boolTag keeps the warm-up's keys apart from the measured ones.
func boolTag(record bool) string {
	if record {
		return ""
	}
	return "-w"
}

func (d *driver) result(elapsed time.Duration) result {
	st := computeLatency(d.latencies)
	ms := func(x time.Duration) float64 { return round(float64(x)/float64(time.Millisecond), 3) }
	return result{
		System: d.o.System, Mode: d.o.Mode, Clients: d.o.Clients, Pair: d.o.Pair,
		Targets: len(d.o.Targets), ArgsSize: d.o.ArgsSize,
		Seconds: round(elapsed.Seconds(), 3), Calls: d.calls, Errors: d.errs,
		CallsPerS: round(float64(d.calls)/elapsed.Seconds(), 1),
		P50MS:     ms(st.P50), P90MS: ms(st.P90), P99MS: ms(st.P99), P999MS: ms(st.P999),
		FirstError: d.firstError,
	}
}
