package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestMCPCostPerCall measures what a call costs the node over MCP beside
// over HTTP (docs/performance.md#mcp-beside-http), with real clients: 32 sessions of the
// official Go SDK's client at each protocol version, and 32 HTTP clients
// of POST /v1/tools/call, one after the other against one node (carmy
// serve --dev), each kind for CARMY_MCP_COST_DURATION (default 8s) after
// a second of warm-up, CARMY_MCP_COST_ROUNDS times (default 3),
// interleaved. The node's CPU time comes from /proc/<pid>/stat, less
// what it spends idle (measured first, for 3 s). With
// CARMY_MCP_COST_RATE (calls/s, default 0: as fast as the clients go) the
// clients are paced, so that every kind runs at the same load.
//
// It is a measurement, not a check: it reports, per kind, the medians of
// calls/s and of node CPU per call, and the ratio to HTTP's, and asserts
// only that the calls succeeded. CARMY_MCP_COST_BIN names a carmy binary
// to measure instead of the one built from this tree (another version,
// for a before and after). CARMY_MCP_COST_PROFILE names a directory
// where the node's CPU profile of each kind's first round is written
// (<kind>.pprof, for `go tool pprof`). Run it with
//
//	CARMY_MCP_COST=1 go test -count=1 -run TestMCPCostPerCall -v ./cmd/carmy
func TestMCPCostPerCall(t *testing.T) {
	if os.Getenv("CARMY_MCP_COST") == "" {
		t.Skip("a measurement: set CARMY_MCP_COST=1 to run it")
	}
	duration := envDuration(t, "CARMY_MCP_COST_DURATION", 8*time.Second)
	rounds, _ := strconv.Atoi(os.Getenv("CARMY_MCP_COST_ROUNDS"))
	if rounds <= 0 {
		rounds = 3
	}
	rate, _ := strconv.ParseFloat(os.Getenv("CARMY_MCP_COST_RATE"), 64)
	const clients = 32

	bin := os.Getenv("CARMY_MCP_COST_BIN")
	if bin == "" {
		bin = testutil.BuildCarmy(t)
	}
	profileDir := os.Getenv("CARMY_MCP_COST_PROFILE")
	args := []string{"--dev", "--max-entries", "5000000"}
	if profileDir != "" {
		args = append(args, "--pprof")
	}
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{}, args...)
	n.WaitReady(t, 30*time.Second)

	// What the node spends without calls (Raft, gossip, timers) is taken
	// off every run's CPU time: at a few hundred calls a second it would
	// weigh as much as the calls.
	idleStart := processCPU(t, n.PID())
	time.Sleep(3 * time.Second)
	idlePerSec := float64((processCPU(t, n.PID()) - idleStart).Microseconds()) / 3

	kinds := []string{"http", "mcp 2025-06-18", "mcp 2025-11-25", "mcp 2026-07-28"}
	perSec := map[string][]float64{}
	cpuPer := map[string][]float64{}
	var seq atomic.Int64
	for round := range rounds {
		for _, kind := range kinds {
			callers := costCallers(t, n.URL, kind, clients, &seq)
			runFor := func(d time.Duration) (calls int64, cpu time.Duration) {
				ctx, cancel := context.WithTimeout(t.Context(), d)
				defer cancel()
				pace := pacer(ctx, rate)
				startCPU := processCPU(t, n.PID())
				var profiled sync.WaitGroup
				if profileDir != "" && round == 0 && d == duration {
					profiled.Go(func() {
						profileNode(t, n.URL, d, filepath.Join(profileDir, strings.ReplaceAll(kind, " ", "-")+".pprof"))
					})
				}
				var done atomic.Int64
				var wg sync.WaitGroup
				for _, call := range callers {
					wg.Go(func() {
						for ctx.Err() == nil {
							if pace != nil && !pace() {
								return
							}
							if err := call(); err != nil {
								if ctx.Err() == nil {
									t.Errorf("%s: %v", kind, err)
									cancel()
								}
								return
							}
							done.Add(1)
						}
					})
				}
				wg.Wait()
				cpu = processCPU(t, n.PID()) - startCPU
				profiled.Wait()
				return done.Load(), cpu
			}
			runFor(time.Second) // warm-up
			calls, cpu := runFor(duration)
			if t.Failed() {
				t.FailNow()
			}
			net := (float64(cpu.Microseconds()) - idlePerSec*duration.Seconds()) / float64(calls)
			perSec[kind] = append(perSec[kind], float64(calls)/duration.Seconds())
			cpuPer[kind] = append(cpuPer[kind], net)
			t.Logf("round %d, %-15s %8.0f calls/s, node CPU %6.1f µs a call (%6.1f with its idle CPU)",
				round+1, kind, float64(calls)/duration.Seconds(), net, float64(cpu.Microseconds())/float64(calls))
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| calls | calls/s | node CPU a call | CPU / HTTP's | calls/s / HTTP's |\n|---|---|---|---|---|\n")
	httpCPU, httpRate := median(cpuPer["http"]), median(perSec["http"])
	for _, kind := range kinds {
		c, r := median(cpuPer[kind]), median(perSec[kind])
		fmt.Fprintf(&table, "| %s | %.0f | %.0f µs | %.2f | %.2f |\n", kind, r, c, c/httpCPU, r/httpRate)
	}
	t.Logf("medians of %d rounds of %s, %d clients each, rate %v, node CPU net of its idle %.0f µs/s:%s",
		rounds, duration, clients, rateName(rate), idlePerSec, table.String())
}

// costCallers returns one call function per client of kind.
func costCallers(t *testing.T, base, kind string, clients int, seq *atomic.Int64) []func() error {
	t.Helper()
	payload := strings.Repeat("x", 64)
	var out []func() error
	if kind == "http" {
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
		t.Cleanup(hc.CloseIdleConnections)
		for range clients {
			out = append(out, func() error {
				body := fmt.Sprintf(`{"tool":"echo","arguments":{"payload":%q},"session_id":"cost","request_id":"h-%d"}`, payload, seq.Add(1))
				resp, err := hc.Post(base+"/v1/tools/call", "application/json", strings.NewReader(body))
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"status":"completed"`)) {
					return fmt.Errorf("POST /v1/tools/call: %d %s", resp.StatusCode, b)
				}
				return nil
			})
		}
		return out
	}
	version := strings.TrimPrefix(kind, "mcp ")
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	t.Cleanup(hc.CloseIdleConnections)
	for range clients {
		c := sdk.NewClient(&sdk.Implementation{Name: "carmy-cost", Version: "v1"}, nil)
		cs, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true},
			&sdk.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("%s: connect: %v", kind, err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		out = append(out, func() error {
			res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"payload": payload},
				Meta: sdk.Meta{"carmy/session_id": "cost", "carmy/request_id": "m-" + strconv.FormatInt(seq.Add(1), 10)}})
			if err != nil {
				return err
			}
			if res.IsError || res.Meta["carmy/status"] != "completed" {
				return fmt.Errorf("tools/call: %+v", res)
			}
			return nil
		})
	}
	return out
}

// profileNode writes to path the node's CPU profile of the next d (less
// half a second, to end within the run).
func profileNode(t *testing.T, base string, d time.Duration, path string) {
	secs := max(1, int((d-500*time.Millisecond)/time.Second))
	resp, err := http.Get(base + "/debug/pprof/profile?seconds=" + strconv.Itoa(secs))
	if err != nil {
		t.Errorf("profiling the node: %v", err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("profiling the node: %d %v", resp.StatusCode, err)
		return
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Errorf("profiling the node: %v", err)
	}
}

// pacer returns a wait that holds each call to its slot of a schedule
// of rate calls a second from now until ctx ends (false then); nil for
// rate 0. A call late for its slot goes at once.
func pacer(ctx context.Context, rate float64) func() bool {
	if rate <= 0 {
		return nil
	}
	start := time.Now()
	var n atomic.Int64
	return func() bool {
		slot := start.Add(time.Duration(float64(n.Add(1)-1) / rate * float64(time.Second)))
		if d := time.Until(slot); d > 0 {
			timer := time.NewTimer(d)
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-ctx.Done():
				return false
			}
		}
		return ctx.Err() == nil
	}
}

// processCPU is the CPU time (user and system) process pid has used,
// from /proc/<pid>/stat (in USER_HZ ticks of 10 ms).
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("the node's CPU time: %v", err)
	}
	// Fields after the command name, which is in parentheses: state is
	// the first, utime the 12th and stime the 13th.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %s", pid, raw)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func rateName(rate float64) string {
	if rate <= 0 {
		return "unpaced"
	}
	return fmt.Sprintf("%.0f calls/s", rate)
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}
