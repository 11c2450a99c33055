package main_test

// Black-box test of `carmy traces` (docs/tracing.md, "Seeing a trace
// without Jaeger"): the built binary receives a dev node's spans, prints
// the call's trace as a tree and writes it as Jaeger UI JSON.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// tracesProcess is a running `carmy traces`.
type tracesProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *testutil.SyncBuffer
	endpoint       string // http://host:port
	done           chan error
}

var tracesEndpoint = regexp.MustCompile(`OTEL_EXPORTER_OTLP_ENDPOINT=(http://\S+) carmy serve --dev`)

// startTraces starts `bin traces --listen 127.0.0.1:0 args…` and waits
// for the endpoint it prints; it is killed when the test ends if it
// still runs.
func startTraces(t *testing.T, bin string, args ...string) *tracesProcess {
	t.Helper()
	p := &tracesProcess{stdout: &testutil.SyncBuffer{}, stderr: &testutil.SyncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"traces", "--listen", "127.0.0.1:0"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("carmy traces stdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
		}
	})
	testutil.WaitFor(t, 10*time.Second, "carmy traces to print its endpoint", func() error {
		m := tracesEndpoint.FindStringSubmatch(p.stdout.String())
		if m == nil {
			return fmt.Errorf("no endpoint line in %q (stderr %q)", p.stdout, p.stderr)
		}
		p.endpoint = m[1]
		return nil
	})
	return p
}

// jaegerFile is what the test reads of a Jaeger UI JSON file.
type jaegerFile struct {
	Data []struct {
		TraceID string `json:"traceID"`
		Spans   []struct {
			TraceID       string `json:"traceID"`
			SpanID        string `json:"spanID"`
			OperationName string `json:"operationName"`
			References    []struct {
				RefType string `json:"refType"`
				SpanID  string `json:"spanID"`
			} `json:"references"`
			StartTime int64 `json:"startTime"`
			Duration  int64 `json:"duration"`
			Tags      []struct {
				Key   string `json:"key"`
				Type  string `json:"type"`
				Value any    `json:"value"`
			} `json:"tags"`
			ProcessID string `json:"processID"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string `json:"serviceName"`
		} `json:"processes"`
	} `json:"data"`
}

func TestBlackBoxTracesPrintsACallsTraceAndWritesJaegerJSON(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	jaeger := filepath.Join(t.TempDir(), "traces.json")
	tr := startTraces(t, bin, "--jaeger", jaeger)
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + tr.endpoint, "OTEL_BSP_SCHEDULE_DELAY=50"}}, "--dev")
	n.WaitReady(t, 30*time.Second)

	status, raw := tracedPost(t, n.URL+"/v1/tools/call", "00-"+httpTraceID+"-"+callerSpan+"-01",
		`{"tool":"echo","arguments":{"hello":"world"},"request_id":"traced-1"}`)
	if status != http.StatusOK {
		t.Fatalf("call: %d %s", status, raw)
	}
	execID := executionIDOf(t, raw)

	// The tree: the trace's line, the call under the caller's span, its
	// three children indented under it.
	var tree string
	testutil.WaitFor(t, 20*time.Second, "the call's trace printed", func() error {
		out := tr.stdout.String()
		i := strings.Index(out, "trace "+httpTraceID)
		if i < 0 {
			return fmt.Errorf("trace %s not printed yet", httpTraceID)
		}
		tree, _, _ = strings.Cut(out[i:], "\n\n")
		return nil
	})
	lines := strings.Split(tree, "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], "carmy, 4 spans") {
		t.Fatalf("tree:\n%s\nwant the trace's line and 4 spans", tree)
	}
	call := lines[1]
	for _, want := range []string{"  carmy.call  ", "server", "carmy.tool=echo", "carmy.outcome=ran", "carmy.execution_id=" + execID, "parent " + callerSpan} {
		if !strings.Contains(call, want) {
			t.Errorf("the call's line %q lacks %q", call, want)
		}
	}
	children := map[string]string{}
	for _, l := range lines[2:] {
		if !strings.HasPrefix(l, "  ├─ carmy.") && !strings.HasPrefix(l, "  └─ carmy.") {
			t.Errorf("line %q is not a child of the call", l)
			continue
		}
		name, _, _ := strings.Cut(l[len("  ├─ "):], " ")
		children[name] = l
	}
	for name, want := range map[string]string{"carmy.reserve": "carmy.outcome=reserved", "carmy.tool": "carmy.status=completed", "carmy.complete": "internal"} {
		if !strings.Contains(children[name], want) {
			t.Errorf("child %s: %q, want %q in it", name, children[name], want)
		}
	}

	// The Jaeger file: the same trace, the children CHILD_OF the call.
	var doc jaegerFile
	testutil.WaitFor(t, 10*time.Second, "the Jaeger file written", func() error {
		raw, err := os.ReadFile(jaeger)
		if err != nil {
			return err
		}
		doc = jaegerFile{}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return fmt.Errorf("not JSON: %w", err)
		}
		if len(doc.Data) != 1 || len(doc.Data[0].Spans) != 4 {
			return fmt.Errorf("%d traces, want 1 of 4 spans", len(doc.Data))
		}
		return nil
	})
	trace := doc.Data[0]
	if trace.TraceID != httpTraceID {
		t.Errorf("the file's trace is %s, want %s", trace.TraceID, httpTraceID)
	}
	var callID string
	for _, s := range trace.Spans {
		if s.OperationName == "carmy.call" {
			callID = s.SpanID
		}
	}
	for _, s := range trace.Spans {
		if s.TraceID != httpTraceID || s.StartTime < 1e15 || s.Duration < 0 || trace.Processes[s.ProcessID].ServiceName != "carmy" || len(s.Tags) == 0 {
			t.Errorf("span %s: %+v", s.OperationName, s)
		}
		wantParent := callID
		if s.OperationName == "carmy.call" {
			wantParent = callerSpan
		}
		if len(s.References) != 1 || s.References[0].RefType != "CHILD_OF" || s.References[0].SpanID != wantParent {
			t.Errorf("span %s: references %+v, want CHILD_OF %s", s.OperationName, s.References, wantParent)
		}
	}

	// Ctrl-C: it stops, exit 0, saying what it kept.
	if err := tr.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-tr.done:
		if err != nil {
			t.Errorf("carmy traces after SIGINT: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("carmy traces did not stop within 10s of SIGINT")
	}
	if !strings.Contains(tr.stderr.String(), "stopped; 1 traces (4 spans) kept") {
		t.Errorf("stderr %q, want the count of what it kept", tr.stderr)
	}
}
