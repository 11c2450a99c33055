package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Usage is the help of `carmy bench`.
const Usage = benchUsage

// ErrUsage means the command line was wrong; the problem, with a hint to
// the usage, was already printed (carmy exits 2).
var ErrUsage = errors.New("usage")

// Env is what a run reads and writes besides its arguments.
type Env struct {
	// Getenv reads the defaults ($CARMY_BENCH_TARGETS, $CARMY_TOKEN,
	// $CARMY_CA_FILE).
	Getenv func(string) string
	// Stdout gets the result (and --help); Stderr the progress and the
	// usage errors.
	Stdout, Stderr io.Writer
	// Version is the carmy build's, sent in the User-Agent carmy-bench/….
	Version string
}

// Run runs `carmy bench args…`. A usage error is ErrUsage; any other
// error means the run failed or was interrupted (the result, when there is
// one, was printed).
func Run(ctx context.Context, args []string, env Env) error {
	stdout, stderr := env.Stdout, env.Stderr
	opts, err := parseBenchFlags(args, env.Getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if opts.Table != "" {
		return printComparisonFile(stdout, opts.Table)
	}
	opts.Version = env.Version
	d, err := newBenchDriver(opts)
	if err != nil {
		return err
	}
	defer d.close()
	res, err := d.run(ctx, stderr)
	if res != nil {
		var perr error
		if opts.JSON {
			perr = writeResultJSON(stdout, res)
		} else {
			perr = printResult(stdout, res)
		}
		if err == nil {
			err = perr
		}
	}
	return err
}

// run seeds (replay mode), warms up, then measures, and returns the
// result of the measured calls. The error is for a run that was
// interrupted, measured nothing, or whose every call failed; the result is
// still given when there is one to print.
func (d *benchDriver) run(ctx context.Context, stderr io.Writer) (*benchResult, error) {
	o := d.opts
	hint := o.Calls
	if hint == 0 {
		hint = int64(o.Clients) * 1024
	}
	clients := newBenchClients(o.Clients, len(d.targets), hint)
	defer closeConns(clients)

	if o.Mode == modeReplay {
		if err := d.seed(ctx, clients, stderr); err != nil {
			return nil, err
		}
	}
	if o.Warmup > 0 {
		ph := &benchPhase{name: "warmup", kind: o.Mode, deadline: time.Now().Add(o.Warmup)}
		stop := d.showProgress(stderr, ph)
		d.runPhase(ctx, clients, ph)
		stop()
		if ctx.Err() != nil {
			return nil, errors.New("interrupted while warming up")
		}
	}

	var before []promSample
	if o.Metrics {
		before = scrapeMetrics(ctx, d.client, d.bases(), o.Timeout)
	}
	ph := &benchPhase{name: "measuring", kind: o.Mode, record: true}
	if o.Calls > 0 {
		ph.budget, ph.total = newCallBudget(o.Calls), o.Calls
	} else {
		ph.deadline = time.Now().Add(o.Duration)
	}
	stop := d.showProgress(stderr, ph)
	d.stall.start(time.Now())
	elapsed := d.runPhase(ctx, clients, ph)
	stop()
	interrupted := ctx.Err() != nil

	res := d.result(clients, elapsed, interrupted)
	if longest, from, to := d.stall.end(time.Now()); longest > 0 {
		res.LongestStallMS = round(float64(longest)/float64(time.Millisecond), 3)
		res.StallFrom, res.StallTo = from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano)
	}
	if o.Metrics && !interrupted {
		after := scrapeMetrics(ctx, d.client, d.bases(), o.Timeout)
		if res.Calls > 0 {
			if w, ok := counterDelta(before, after, metricLogWrites); ok {
				v := round(w/float64(res.Calls), 4)
				res.LogWritesPerCall = &v
			}
			if e, ok := counterDelta(before, after, metricLogEntries); ok {
				v := round(e/float64(res.Calls), 4)
				res.LogEntriesPerCall = &v
			}
		}
	}
	switch {
	case res.Calls == 0 && interrupted:
		return res, errors.New("interrupted before any call was counted")
	case res.Calls == 0:
		return res, fmt.Errorf("no call was made within --duration %s", o.Duration)
	case res.Errors == res.Calls:
		return res, d.allFailed("every call failed", res.Outcomes)
	case interrupted:
		// Not a success, so that a script stops too.
		return res, fmt.Errorf("interrupted after %.1fs: the result covers the %d calls made until then", elapsed.Seconds(), res.Calls)
	}
	return res, nil
}

// seed makes --replay-pool new calls and keeps the ids that finished, for
// the replays.
func (d *benchDriver) seed(ctx context.Context, clients []*benchClient, stderr io.Writer) error {
	n := int64(d.opts.ReplayPool)
	ph := &benchPhase{name: "seeding the replay pool", kind: phaseSeed, budget: newCallBudget(n), total: n, record: true}
	stop := d.showProgress(stderr, ph)
	took := d.runPhase(ctx, clients, ph)
	stop()
	if ctx.Err() != nil {
		return errors.New("interrupted while seeding the replay pool")
	}
	outcomes := map[string]int64{}
	for _, c := range clients {
		d.pool = append(d.pool, c.seeded...)
		for o, k := range c.outcomes {
			outcomes[o] += k
		}
		c.seeded, c.outcomes, c.latencies = nil, map[string]int64{}, c.latencies[:0]
	}
	failed := n - int64(len(d.pool))
	if len(d.pool) == 0 {
		return d.allFailed("seeding the replay pool: every call failed", outcomes)
	}
	if d.opts.Progress > 0 {
		fmt.Fprintf(stderr, "carmy bench: seeded %d calls in %s", len(d.pool), took.Round(time.Millisecond))
		if failed > 0 {
			fmt.Fprintf(stderr, " (%d failed; the replays repeat the others)", failed)
		}
		fmt.Fprintln(stderr)
	}
	return nil
}

// allFailed explains a run whose every call failed: the outcomes, and
// what the first call of each said.
func (d *benchDriver) allFailed(what string, outcomes map[string]int64) error {
	names := make([]string, 0, len(outcomes))
	for o := range outcomes {
		names = append(names, o)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(what)
	for _, o := range names {
		fmt.Fprintf(&b, "\n  %s", o)
		if detail := d.errorDetail(o); detail != "" {
			fmt.Fprintf(&b, ": %s", detail)
		}
	}
	if _, ok := outcomes[outcomeTransport]; ok {
		fmt.Fprintf(&b, "\nIs a node running at %s? Set --targets or $%s.", strings.Join(d.opts.Targets, ","), envBenchTargets)
	}
	return errors.New(b.String())
}

// bases returns the base URL of every target.
func (d *benchDriver) bases() []string {
	out := make([]string, len(d.targets))
	for i, t := range d.targets {
		out[i] = t.base
	}
	return out
}

// showProgress prints a line on stderr every --progress while ph runs,
// until the returned stop is called.
func (d *benchDriver) showProgress(stderr io.Writer, ph *benchPhase) (stop func()) {
	every := d.opts.Progress
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		start := time.Now()
		tick := time.NewTicker(every)
		defer tick.Stop()
		last, lastCalls := start, int64(0)
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				calls := d.liveCalls.Load()
				rate := float64(calls-lastCalls) / now.Sub(last).Seconds()
				last, lastCalls = now, calls
				total := ""
				if ph.total > 0 {
					total = fmt.Sprintf(" of %d", ph.total)
				}
				fmt.Fprintf(stderr, "carmy bench: %s %5.1fs  calls %d%s  %.0f/s  errors %d\n",
					ph.name, now.Sub(start).Seconds(), calls, total, rate, d.liveErrors.Load())
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
