package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// runBench runs `carmy bench args…` with env as the environment.
func runBench(t *testing.T, ctx context.Context, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = Run(ctx, args, Env{Getenv: fakeEnv(env), Stdout: &out, Stderr: &errOut, Version: "test"})
	return out.String(), errOut.String(), err
}

// benchJSON runs `carmy bench --json --quiet args…` and decodes its
// result, failing the test if the run fails.
func benchJSON(t *testing.T, args ...string) benchResult {
	t.Helper()
	stdout, stderr, err := runBench(t, t.Context(), nil, append([]string{"--json", "--quiet"}, args...)...)
	if err != nil {
		t.Fatalf("carmy bench %q: %v; stderr:\n%s", args, err, stderr)
	}
	var res benchResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("carmy bench %q printed %q: %v", args, stdout, err)
	}
	return res
}

// checkLatency fails the test unless res's latencies are in order.
func checkLatency(t *testing.T, res benchResult) {
	t.Helper()
	l := res.LatencyMS
	if !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max && l.Mean > 0 && l.Mean <= l.Max) {
		t.Errorf("latency_ms = %+v, want 0 < p50 <= p90 <= p99 <= p99.9 <= max and 0 < mean <= max", l)
	}
}

// TestBenchAgainstARealNode runs each mode against a `carmy serve --dev`
// process.
func TestBenchAgainstARealNode(t *testing.T) {
	bin := testutil.BuildCarmy(t)
	s := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--dev", "--node-id", "bench")
	s.WaitReady(t, 30*time.Second)

	t.Run("new", func(t *testing.T) {
		res := benchJSON(t, "--targets", s.Addr, "--calls", "200", "--clients", "4")
		if res.Calls != 200 || res.Errors != 0 || len(res.Outcomes) != 1 || res.Outcomes["ran"] != 200 {
			t.Errorf("calls %d, errors %d, outcomes %v; want 200 calls that all ran", res.Calls, res.Errors, res.Outcomes)
		}
		if res.Mode != "new" || res.Clients != 4 || res.Tool != "echo" || len(res.Targets) != 1 || res.Targets[0] != s.Addr {
			t.Errorf("result = %+v, want mode new, 4 clients, echo, the target", res)
		}
		if res.CallsPerSec <= 0 || res.DurationS <= 0 {
			t.Errorf("calls_per_sec %v, duration_s %v; want both positive", res.CallsPerSec, res.DurationS)
		}
		checkLatency(t, res)
		if res.LogWritesPerCall != nil && *res.LogWritesPerCall < 0 {
			t.Errorf("log_writes_per_call = %v, want >= 0", *res.LogWritesPerCall)
		}
	})

	t.Run("mcp", func(t *testing.T) {
		for _, version := range []string{"", "2026-07-28", "2025-11-25", "2025-06-18"} {
			args := []string{"--targets", s.Addr, "--transport", "mcp", "--calls", "100", "--clients", "4"}
			want := version
			if version == "" {
				want = mcpVersionNewest // the default
			} else {
				args = append(args, "--mcp-version", version)
			}
			res := benchJSON(t, args...)
			if res.Calls != 100 || res.Errors != 0 || len(res.Outcomes) != 1 || res.Outcomes["ran"] != 100 || res.Transport != "mcp" || res.MCPVersion != want {
				t.Errorf("%s: calls %d, errors %d, outcomes %v, transport %q %q; want 100 MCP calls at %s that all ran",
					version, res.Calls, res.Errors, res.Outcomes, res.Transport, res.MCPVersion, want)
			}
		}
		res := benchJSON(t, "--targets", s.Addr, "--transport", "mcp", "--mode", "replay", "--replay-pool", "10", "--calls", "50", "--clients", "2")
		if res.Calls != 50 || res.Errors != 0 || res.Outcomes["replayed"] != 50 {
			t.Errorf("replay over MCP: calls %d, errors %d, outcomes %v; want 50 replays", res.Calls, res.Errors, res.Outcomes)
		}
	})

	t.Run("replay", func(t *testing.T) {
		res := benchJSON(t, "--targets", "http://"+s.Addr+"/", "--mode", "replay", "--replay-pool", "20",
			"--calls", "150", "--clients", "4", "--args-size", "1000")
		if res.Calls != 150 || res.Errors != 0 || len(res.Outcomes) != 1 || res.Outcomes["replayed"] != 150 {
			t.Errorf("calls %d, errors %d, outcomes %v; want 150 calls, all replayed", res.Calls, res.Errors, res.Outcomes)
		}
		checkLatency(t, res)
	})

	t.Run("mixed", func(t *testing.T) {
		res := benchJSON(t, "--targets", s.Addr, "--mode", "mixed", "--retry-share", "0.3", "--dup-share", "0.3",
			"--calls", "300", "--clients", "8")
		if res.Calls != 300 {
			t.Errorf("calls = %d, want 300", res.Calls)
		}
		for outcome, n := range res.Outcomes {
			switch outcome {
			case "ran", "replayed", "EXECUTION_UNCERTAIN/running":
			default:
				t.Errorf("outcome %s ×%d, want only ran, replayed and EXECUTION_UNCERTAIN/running", outcome, n)
			}
		}
		if res.Outcomes["ran"] == 0 || res.Outcomes["replayed"] == 0 {
			t.Errorf("outcomes = %v, want some calls that ran and some replays", res.Outcomes)
		}
		// The uncertain answers are what --dup-share provokes, not errors
		// (issue 18, finding 7).
		if res.Errors != 0 {
			t.Errorf("errors = %d, want 0: outcomes %v", res.Errors, res.Outcomes)
		}
	})

	t.Run("table", func(t *testing.T) {
		stdout, _, err := runBench(t, t.Context(), map[string]string{"CARMY_BENCH_TARGETS": s.Addr}, "--calls", "20", "--clients", "2", "--quiet")
		if err != nil {
			t.Fatalf("carmy bench: %v", err)
		}
		for _, re := range []string{
			`(?m)^targets +` + regexp.QuoteMeta(s.Addr) + `$`,
			`(?m)^mode +new   clients 2   duration \d+\.\ds   calls 20   errors 0$`,
			`(?m)^calls/s +\d+\.\d$`,
			`(?m)^latency +mean \S+ms  p50 \S+ms  p90 \S+ms  p99 \S+ms  p99\.9 \S+ms  max \S+ms$`,
			`(?m)^outcome +count +share$`,
			`(?m)^ran +20 +100\.0%$`,
		} {
			if !regexp.MustCompile(re).MatchString(stdout) {
				t.Errorf("stdout does not match %s:\n%s", re, stdout)
			}
		}
	})

	t.Run("progress", func(t *testing.T) {
		// Without --quiet the progress goes to stderr, never stdout.
		stdout, stderr, err := runBench(t, t.Context(), nil, "--targets", s.Addr, "--calls", "10", "--clients", "1", "--json", "--progress", "1ms", "--mode", "replay", "--replay-pool", "5")
		if err != nil {
			t.Fatalf("carmy bench: %v", err)
		}
		if !json.Valid([]byte(stdout)) {
			t.Errorf("stdout = %q, want only the JSON result", stdout)
		}
		if !strings.Contains(stderr, "carmy bench: seeded 5 calls") {
			t.Errorf("stderr = %q, want the seeding reported", stderr)
		}
	})

	if err := s.Stop(15 * time.Second); err != nil {
		t.Errorf("carmy serve exited with %v, want a clean exit", err)
	}
}

// closedAddr returns a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestBenchDeadTarget(t *testing.T) {
	addr := closedAddr(t)
	stdout, _, err := runBench(t, t.Context(), nil, "--targets", addr, "--calls", "20", "--clients", "2", "--json", "--quiet")
	if err == nil || !strings.Contains(err.Error(), "every call failed") || !strings.Contains(err.Error(), "transport: "+addr) {
		t.Fatalf("carmy bench against a closed port: err = %v, want every call failed, naming the target", err)
	}
	if errors.Is(err, ErrUsage) {
		t.Errorf("err = %v is a usage error (exit status 2), want a failed run (1)", err)
	}
	var res benchResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Calls != 20 || res.Errors != 20 || res.Outcomes["transport"] != 20 {
		t.Errorf("stdout = %q (%v), want the report of 20 transport failures", stdout, err)
	}

	// Replay mode fails while seeding, before it measures anything.
	stdout, _, err = runBench(t, t.Context(), nil, "--targets", addr, "--mode", "replay", "--replay-pool", "5", "--calls", "20", "--quiet")
	if err == nil || !strings.Contains(err.Error(), "seeding the replay pool: every call failed") {
		t.Errorf("replay against a closed port: err = %v, want the seeding to fail", err)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing: nothing was measured", stdout)
	}
}

// fakeCallServer is an httptest server answering POST /v1/tools/call with
// answer(n) for the n-th call (from 0), and recording the calls.
type fakeCallServer struct {
	srv *httptest.Server
	mu  sync.Mutex
	// What it was sent.
	auth   []string
	bodies []string
}

func newFakeCallServer(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *fakeCallServer {
	t.Helper()
	f := &fakeCallServer{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/tools/call" {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.bodies)
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.bodies = append(f.bodies, string(body))
		f.mu.Unlock()
		answer(n, w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeCallServer) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

// calls returns the bodies and Authorization headers of the calls so far.
func (f *fakeCallServer) calls() (bodies, auth []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...), append([]string(nil), f.auth...)
}

func answerJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func TestBenchSendsCalls(t *testing.T) {
	f := newFakeCallServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusOK, `{"execution_id":"exec_1","status":"completed","data":{},"replayed":false}`)
	})
	env := map[string]string{"CARMY_BENCH_TARGETS": f.addr(), "CARMY_TOKEN": "tok"}
	_, stderr, err := runBench(t, t.Context(), env, "--calls", "30", "--clients", "3", "--args-size", "10", "--session", "s-1", "--tool", "create_order", "--quiet")
	if err != nil {
		t.Fatalf("carmy bench: %v; stderr:\n%s", err, stderr)
	}
	bodies, auth := f.calls()
	if len(bodies) != 30 {
		t.Fatalf("the server got %d calls, want 30", len(bodies))
	}
	ids := map[string]bool{}
	for i, raw := range bodies {
		var call struct {
			Tool      string            `json:"tool"`
			Arguments map[string]string `json:"arguments"`
			RequestID string            `json:"request_id"`
			SessionID string            `json:"session_id"`
		}
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&call); err != nil {
			t.Fatalf("call %d: %q: %v", i, raw, err)
		}
		if call.Tool != "create_order" || call.SessionID != "s-1" || len(call.Arguments) != 1 || len(call.Arguments["payload"]) != 10 || call.RequestID == "" {
			t.Errorf("call %d = %s, want create_order in session s-1 with a 10-byte payload and a request_id", i, raw)
		}
		if ids[call.RequestID] {
			t.Errorf("request_id %q sent twice in mode new", call.RequestID)
		}
		ids[call.RequestID] = true
		if auth[i] != "Bearer tok" {
			t.Errorf("Authorization = %q, want the token of $CARMY_TOKEN", auth[i])
		}
	}

	// Two runs never share a session or request ids.
	if _, _, err := runBench(t, t.Context(), nil, "--targets", f.addr(), "--calls", "1", "--quiet"); err != nil {
		t.Fatalf("carmy bench: %v", err)
	}
	bodies, auth = f.calls()
	idOf := regexp.MustCompile(`"request_id":"([^"]+)"`)
	if a, b := idOf.FindStringSubmatch(bodies[0])[1], idOf.FindStringSubmatch(bodies[30])[1]; a == b {
		t.Errorf("two runs used the same request_id %q", a)
	}
	if !strings.Contains(bodies[30], `"session_id":"bench-`) || auth[30] != "" {
		t.Errorf("call %s (Authorization %q), want the default session bench-<run id> and no token", bodies[30], auth[30])
	}
}

func TestBenchSpreadsOverTargets(t *testing.T) {
	var servers []*fakeCallServer
	var targets []string
	for range 3 {
		f := newFakeCallServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			answerJSON(w, http.StatusOK, `{"status":"completed","replayed":false}`)
		})
		servers = append(servers, f)
		targets = append(targets, f.addr())
	}
	res := benchJSON(t, "--targets", strings.Join(targets, ","), "--calls", "90", "--clients", "2")
	if res.Outcomes["ran"] != 90 {
		t.Fatalf("outcomes = %v, want 90 ran", res.Outcomes)
	}
	for i, f := range servers {
		bodies, _ := f.calls()
		if n := len(bodies); n < 20 || n > 40 {
			t.Errorf("target %d got %d of 90 calls, want about a third", i, n)
		}
	}
}

func TestBenchClassifiesAnswers(t *testing.T) {
	answers := []struct {
		status int
		header string
		body   string
	}{
		{200, "", `{"status":"completed","replayed":false}`},
		{200, "true", `{"status":"completed","replayed":true}`},
		{409, "", `{"error":{"code":"EXECUTION_UNCERTAIN","message":"running","status":"interrupted","execution_id":"exec_1"}}`},
		{503, "", `{"error":{"code":"UNAVAILABLE","message":"no leader"}}`},
		{502, "", `<html>bad gateway</html>`},
	}
	f := newFakeCallServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		a := answers[n%len(answers)]
		if a.header != "" {
			w.Header().Set("Idempotent-Replayed", a.header)
		}
		answerJSON(w, a.status, a.body)
	})
	res := benchJSON(t, "--targets", f.addr(), "--calls", "50", "--clients", "1")
	want := map[string]int64{"ran": 10, "replayed": 10, "EXECUTION_UNCERTAIN/interrupted": 10, "UNAVAILABLE": 10, "http_502": 10}
	if len(res.Outcomes) != len(want) {
		t.Errorf("outcomes = %v, want %v", res.Outcomes, want)
	}
	for k, v := range want {
		if res.Outcomes[k] != v {
			t.Errorf("outcomes = %v, want %v", res.Outcomes, want)
			break
		}
	}
	if res.Errors != 30 {
		t.Errorf("errors = %d, want 30", res.Errors)
	}

	// Every call an error answer: exit status 1, saying what came back.
	f2 := newFakeCallServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusServiceUnavailable, `{"error":{"code":"UNAVAILABLE","message":"no leader"}}`)
	})
	_, _, err := runBench(t, t.Context(), nil, "--targets", f2.addr(), "--calls", "5", "--quiet")
	if err == nil || !strings.Contains(err.Error(), "UNAVAILABLE: "+f2.addr()+": 503 UNAVAILABLE: no leader") {
		t.Errorf("err = %v, want every call failed with UNAVAILABLE", err)
	}
}

func TestBenchInterrupted(t *testing.T) {
	// The 10th call cancels the run's context, as Ctrl-C does; the 9
	// before it are reported, the one cut short is not counted, and the
	// run fails so that a script stops too.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f := newFakeCallServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 9 {
			cancel()
			<-r.Context().Done() // no answer: the client gives up
			return
		}
		answerJSON(w, http.StatusOK, `{"status":"completed","replayed":false}`)
	})
	stdout, _, err := runBench(t, ctx, nil, "--targets", f.addr(), "--duration", "1h", "--clients", "1", "--json", "--quiet")
	if err == nil || !strings.Contains(err.Error(), "interrupted after") || !strings.Contains(err.Error(), "the 9 calls") {
		t.Errorf("carmy bench interrupted: err = %v, want an error saying it was interrupted after 9 calls", err)
	}
	var res benchResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	if !res.Interrupted || res.Calls != 9 || res.Outcomes["ran"] != 9 {
		t.Errorf("result = %+v, want 9 calls that ran, interrupted", res)
	}
}

func TestBenchMetrics(t *testing.T) {
	// Every call writes the log twice and appends 3 entries; /metrics
	// reports the counters over two label sets.
	var mu sync.Mutex
	writes, entries := 100, 1000
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/metrics":
			io.WriteString(w, "# HELP carmy_raft_log_writes_total Log writes.\n# TYPE carmy_raft_log_writes_total counter\n")
			io.WriteString(w, "carmy_raft_log_writes_total{kind=\"a\"} "+strconv.Itoa(writes/2)+"\n")
			io.WriteString(w, "carmy_raft_log_writes_total{kind=\"b\"} "+strconv.Itoa(writes-writes/2)+"\n")
			io.WriteString(w, "carmy_raft_log_entries_total "+strconv.Itoa(entries)+"\n")
		default:
			io.Copy(io.Discard, r.Body)
			writes += 2
			entries += 3
			answerJSON(w, http.StatusOK, `{"status":"completed","replayed":false}`)
		}
	}))
	defer srv.Close()
	res := benchJSON(t, "--targets", srv.URL, "--calls", "40", "--clients", "4")
	if res.LogWritesPerCall == nil || *res.LogWritesPerCall != 2 || res.LogEntriesPerCall == nil || *res.LogEntriesPerCall != 3 {
		t.Errorf("log writes, entries per call = %v, %v; want 2 and 3", deref(res.LogWritesPerCall), deref(res.LogEntriesPerCall))
	}

	// A target without /metrics: no figure, and no failure.
	f := newFakeCallServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusOK, `{"status":"completed","replayed":false}`)
	})
	stdout, _, err := runBench(t, t.Context(), nil, "--targets", f.addr(), "--calls", "5", "--json", "--quiet")
	if err != nil || strings.Contains(stdout, "log_writes_per_call") {
		t.Errorf("carmy bench against a target without /metrics: %v, %s; want a result without log_writes_per_call", err, stdout)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestBenchUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "fast"}, `--mode "fast": want new, replay or mixed`},
		{[]string{"--clients", "0"}, "--clients 0: want at least 1"},
		{[]string{"--calls", "-1"}, "--calls -1"},
		{[]string{"--duration", "0s"}, "--duration 0s: must be positive"},
		{[]string{"--warmup", "-1s"}, "--warmup -1s"},
		{[]string{"--timeout", "0s"}, "--timeout 0s: must be positive"},
		{[]string{"--mode", "mixed", "--retry-share", "1.5"}, "--retry-share 1.5: want a share between 0 and 1"},
		{[]string{"--mode", "mixed", "--dup-share", "-0.1"}, "--dup-share -0.1"},
		{[]string{"--mode", "mixed", "--dup-share", "NaN"}, "--dup-share NaN"},
		{[]string{"--retry-share", "0.5"}, "--retry-share and --dup-share belong to --mode mixed"},
		{[]string{"--replay-pool", "10"}, "--replay-pool belongs to --mode replay"},
		{[]string{"--mode", "replay", "--replay-pool", "0"}, "--replay-pool 0: want at least 1"},
		{[]string{"--args-size", "-1"}, "--args-size -1"},
		{[]string{"--tool", ""}, "--tool is empty"},
		{[]string{"--transport", "mcp", "--mcp-version", "2025-03-26"}, `--mcp-version "2025-03-26": want one of 2026-07-28, 2025-11-25, 2025-06-18`},
		{[]string{"--mcp-version", "2025-11-25"}, "--mcp-version belongs to --transport mcp"},
		{[]string{"--tool", `a"b`}, `--tool "a\"b"`},
		{[]string{"--session", "has space"}, `--session "has space"`},
		{[]string{"--targets", ""}, "--targets is empty"},
		{[]string{"--targets", "localhost"}, `--targets: "localhost": want host:port`},
		{[]string{"--targets", "127.0.0.1:1,http://"}, `--targets: "http://"`},
		{[]string{"--progress", "-1s"}, "--progress -1s"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--no-such-flag"}, "unknown flag --no-such-flag"},
		{[]string{"--clients", "many"}, `invalid value "many" for flag -clients`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			stdout, stderr, err := runBench(t, t.Context(), nil, tt.args...)
			if !errors.Is(err, ErrUsage) {
				t.Fatalf("err = %v, want a usage error", err)
			}
			if !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "carmy bench --help") {
				t.Errorf("stderr = %q, want %q and a hint to the usage", stderr, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}
}

func TestBenchDefaults(t *testing.T) {
	o, err := parseBenchFlags(nil, fakeEnv(nil), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Targets) != 1 || o.Targets[0] != "127.0.0.1:8080" || o.Token != "" || o.Clients != 16 || o.Duration != 10*time.Second ||
		o.Calls != 0 || o.Warmup != 0 || o.Mode != "new" || o.ReplayPool != 1000 || o.RetryShare != 0.2 || o.DupShare != 0.05 ||
		o.Tool != "echo" || o.ArgsSize != 64 || o.Session != "" || o.Timeout != 10*time.Second || !o.Metrics ||
		o.Progress != time.Second || o.JSON {
		t.Errorf("defaults = %+v", o)
	}
	o, err = parseBenchFlags([]string{"--targets", " a:1 , http://b:2/ ,", "--quiet", "--token", "flag"},
		fakeEnv(map[string]string{"CARMY_BENCH_TARGETS": "c:3", "CARMY_TOKEN": "env"}), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Targets, ",") != "a:1,http://b:2/" || o.Progress != 0 || o.Token != "flag" {
		t.Errorf("options = %+v, want the targets a:1 and http://b:2/, no progress, the --token", o)
	}
}

func TestBenchPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	if got := computeLatency(nil); got != (latencyStats{}) {
		t.Errorf("computeLatency(nil) = %+v, want zeros", got)
	}
	one := computeLatency(ms(7))
	if one != (latencyStats{Mean: 7 * time.Millisecond, P50: 7 * time.Millisecond, P90: 7 * time.Millisecond,
		P99: 7 * time.Millisecond, P999: 7 * time.Millisecond, Max: 7 * time.Millisecond}) {
		t.Errorf("computeLatency(7ms) = %+v, want 7ms everywhere", one)
	}

	// 1..1000 ms, shuffled: the nearest rank is the value itself.
	var samples []time.Duration
	for i := 1000; i >= 1; i-- {
		samples = append(samples, time.Duration((i*7919)%1000+1)*time.Millisecond)
	}
	st := computeLatency(samples)
	want := latencyStats{Mean: 500500 * time.Microsecond, P50: 500 * time.Millisecond, P90: 900 * time.Millisecond,
		P99: 990 * time.Millisecond, P999: 999 * time.Millisecond, Max: 1000 * time.Millisecond}
	if st != want {
		t.Errorf("computeLatency(1..1000ms) = %+v, want %+v", st, want)
	}

	sorted := ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	for _, tt := range []struct {
		permille int
		want     time.Duration
	}{{0, 1}, {1, 1}, {100, 1}, {101, 2}, {500, 5}, {501, 6}, {900, 9}, {990, 10}, {999, 10}, {1000, 10}} {
		if got := percentile(sorted, tt.permille); got != tt.want*time.Millisecond {
			t.Errorf("percentile(1..10, %d‰) = %s, want %dms", tt.permille, got, tt.want)
		}
	}
	if got := percentile(nil, 500); got != 0 {
		t.Errorf("percentile(nil) = %s, want 0", got)
	}
	merged := mergeLatencies([][]time.Duration{ms(3, 1), nil, ms(2)})
	if len(merged) != 3 || computeLatency(merged).P50 != 2*time.Millisecond {
		t.Errorf("mergeLatencies = %v, want the 3 samples", merged)
	}
}

func TestBenchParsePromText(t *testing.T) {
	text := `# HELP carmy_raft_log_writes_total Writes to the Raft log.
# TYPE carmy_raft_log_writes_total counter
carmy_raft_log_writes_total 12
carmy_raft_log_entries_total{node="a b",path="x}y"} 3.5
carmy_raft_log_entries_total{node="q\"}",le="+Inf"} 1.5e1 1712345678000

  go_goroutines   42
http_requests_total{code="200"} +Inf
nan_metric NaN
broken_line
broken{unterminated="x 1
no_value{a="b"}
too_many 1 2 3
bad_value abc
`
	got := parsePromText(strings.NewReader(text))
	for name, want := range map[string]float64{
		"carmy_raft_log_writes_total":  12,
		"carmy_raft_log_entries_total": 18.5,
		"go_goroutines":                42,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if v, ok := got["http_requests_total"]; !ok || v <= 1e308 {
		t.Errorf("http_requests_total = %v, want +Inf", v)
	}
	if v, ok := got["nan_metric"]; !ok || v == v {
		t.Errorf("nan_metric = %v, want NaN", v)
	}
	for _, name := range []string{"broken_line", "broken", "no_value", "too_many", "bad_value", "#", "HELP"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s was read from a line that is not a sample", name)
		}
	}
	if len(got) != 5 {
		t.Errorf("parsed %v, want 5 metrics", got)
	}

	// Deltas over targets, averaged per node: only those scraped both
	// times count.
	before := []promSample{{"w": 10}, nil, {"w": 5}, {"other": 1}}
	after := []promSample{{"w": 14}, {"w": 100}, {"w": 7}, {"other": 2}}
	if d, ok := counterDelta(before, after, "w"); !ok || d != 3 {
		t.Errorf("delta of w = %v, %v; want 3 (6 over 2 nodes)", d, ok)
	}
	if _, ok := counterDelta(before, after, "absent"); ok {
		t.Error("delta of a counter no target exposes: ok, want unknown")
	}
	if _, ok := counterDelta([]promSample{{"w": 10}}, []promSample{{"w": 3}}, "w"); ok {
		t.Error("delta of a counter that went down (a restart): ok, want unknown")
	}
}

func TestBenchComparisonTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	lines := `{"label":"1-node","targets":["a:1"],"mode":"new","clients":16,"duration_s":1,"calls":100,"errors":0,"calls_per_sec":1234.56,"latency_ms":{"mean":1,"p50":0.5,"p90":1,"p99":12.34,"p999":20,"max":30},"outcomes":{"ran":100},"log_writes_per_call":0.25}

{"label":"3-node","targets":["a:1","b:2","c:3"],"mode":"replay","clients":64,"duration_s":1,"calls":100,"errors":2,"calls_per_sec":99,"latency_ms":{"mean":1,"p50":1.5,"p90":2,"p99":3,"p999":4,"max":5},"outcomes":{"replayed":98,"UNAVAILABLE":2}}
`
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runBench(t, t.Context(), nil, "--table", path)
	if err != nil {
		t.Fatalf("carmy bench --table: %v", err)
	}
	want := `cluster  mode    clients  calls/s  p50      p99     p99.9   errors  log writes/call
1-node   new     16       1234.6   0.500ms  12.3ms  20.0ms  0       0.25
3-node   replay  64       99.0     1.50ms   3.00ms  4.00ms  2       -
`
	if stdout != want {
		t.Errorf("stdout =\n%s\nwant\n%s", stdout, want)
	}

	if err := os.WriteFile(path, []byte("{}\nnot json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runBench(t, t.Context(), nil, "--table", path); err == nil || !strings.Contains(err.Error(), "results.jsonl:2: not a carmy bench --json result") {
		t.Errorf("--table of a broken file: err = %v, want the line named", err)
	}
}

// fakeEnv is an environment of the variables in m.
func fakeEnv(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}
