package main_test

// Black-box tests of OpenTelemetry tracing (docs/tracing.md): a built
// `carmy serve` exporting over OTLP/HTTP to a receiver the test runs,
// called over HTTP and MCP with W3C trace context, its HTTP tool's
// upstream checking what trace context it is passed.

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/carmyhq/carmy/tests/testutil"
)

// otlpSpan is what the test reads of an exported span.
type otlpSpan struct {
	name, traceID, parentID string
	attrs                   map[string]string
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes every
// POST /v1/traces and keeps its spans.
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	spans    []otlpSpan
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rcv := &otlpReceiver{}
	rcv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || err != nil || proto.Unmarshal(body, &req) != nil {
			t.Errorf("receiver: %s %s (%d bytes, %v): not an OTLP/HTTP protobuf export", r.Method, r.URL.Path, len(body), err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		rcv.requests++
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					sp := otlpSpan{name: s.Name, traceID: hex.EncodeToString(s.TraceId), parentID: hex.EncodeToString(s.ParentSpanId), attrs: map[string]string{}}
					for _, a := range s.Attributes {
						v := a.Value.GetStringValue()
						if _, ok := a.Value.Value.(*commonpb.AnyValue_BoolValue); ok {
							v = strconv.FormatBool(a.Value.GetBoolValue())
						}
						sp.attrs[a.Key] = v
					}
					rcv.spans = append(rcv.spans, sp)
				}
			}
		}
		rcv.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(rcv.Close)
	return rcv
}

// find returns the spans of trace named name.
func (rcv *otlpReceiver) find(trace, name string) []otlpSpan {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var out []otlpSpan
	for _, s := range rcv.spans {
		if s.traceID == trace && s.name == name {
			out = append(out, s)
		}
	}
	return out
}

func (rcv *otlpReceiver) count() int {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	return rcv.requests
}

// startTracedNode starts a node whose one HTTP tool, "order", calls a
// loopback upstream that keeps the traceparent of each request, with env
// added to its environment.
func startTracedNode(t *testing.T, bin string, env ...string) (*testutil.Node, *tracedUpstream) {
	t.Helper()
	up := &tracedUpstream{}
	up.Upstream = testutil.StartUpstream(t, nil, func(w http.ResponseWriter, r *http.Request) {
		up.mu.Lock()
		up.seen = append(up.seen, r.Header.Get("traceparent"))
		up.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	config := fmt.Sprintf("tools:\n  - name: order\n    http:\n      url: %s/orders\n", up.URL)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{Env: env}, "--config", path, "--bootstrap")
	n.WaitReady(t, 30*time.Second)
	return n, up
}

type tracedUpstream struct {
	*testutil.Upstream
	mu   sync.Mutex
	seen []string // the traceparent of each request, "" for none
}

func (u *tracedUpstream) traceparents() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...)
}

// tracedPost posts body to url with the header traceparent (when not "").
func tracedPost(t *testing.T, url, traceparent, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// The trace contexts the calls carry: one trace per transport.
const (
	httpTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	mcpTraceID  = "0af7651916cd43dd8448eb211c80319c"
	callerSpan  = "00f067aa0ba902b7"
)

func TestBlackBoxTracingExportsTheCallAndPassesItsTraceOn(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	rcv := startOTLPReceiver(t)
	n, up := startTracedNode(t, bin, "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=50")

	// checkTrace waits for the call's span in trace, checks its
	// attributes and its children, and that the upstream got a
	// traceparent of the same trace.
	checkTrace := func(t *testing.T, trace, transport, executionID string, upstreamCall int) {
		t.Helper()
		testutil.WaitFor(t, 20*time.Second, "the call's spans exported", func() error {
			for _, name := range []string{"carmy.call", "carmy.reserve", "carmy.tool", "carmy.complete"} {
				if len(rcv.find(trace, name)) == 0 {
					return fmt.Errorf("no span %s in trace %s yet", name, trace)
				}
			}
			return nil
		})
		calls := rcv.find(trace, "carmy.call")
		if len(calls) != 1 {
			t.Fatalf("%d spans carmy.call in trace %s, want 1", len(calls), trace)
		}
		call := calls[0]
		if call.parentID != callerSpan {
			t.Errorf("the call's span has parent %q, want the caller's %s", call.parentID, callerSpan)
		}
		want := map[string]string{"carmy.tool": "order", "carmy.outcome": "ran", "carmy.replayed": "false",
			"carmy.execution_id": executionID, "carmy.principal": "anonymous", "carmy.transport": transport}
		for k, v := range want {
			if call.attrs[k] != v {
				t.Errorf("the call's span: %s=%q, want %q (all: %v)", k, call.attrs[k], v, call.attrs)
			}
		}
		got := up.traceparents()
		if len(got) <= upstreamCall || !strings.HasPrefix(got[upstreamCall], "00-"+trace+"-") {
			t.Errorf("the upstream's requests carried traceparent %q, want request %d in trace %s", got, upstreamCall, trace)
		}
	}

	t.Run("http", func(t *testing.T) {
		status, raw := tracedPost(t, n.URL+"/v1/tools/call", "00-"+httpTraceID+"-"+callerSpan+"-01",
			`{"tool":"order","arguments":{"sku":"KB-01"},"request_id":"traced-http"}`)
		if status != http.StatusOK {
			t.Fatalf("call: %d %s", status, raw)
		}
		checkTrace(t, httpTraceID, "http", executionIDOf(t, raw), 0)
	})
	t.Run("mcp", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"order","arguments":{"sku":"KB-02"},` +
			`"_meta":{"carmy/request_id":"traced-mcp","traceparent":"00-` + mcpTraceID + `-` + callerSpan + `-01"}}}`
		status, raw := tracedPost(t, n.URL+"/mcp", "", body,
			"Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", "2025-11-25")
		if status != http.StatusOK || !strings.Contains(raw, `"carmy/execution_id":"`) {
			t.Fatalf("tools/call: %d %s", status, raw)
		}
		id := raw[strings.Index(raw, `"carmy/execution_id":"`)+len(`"carmy/execution_id":"`):]
		checkTrace(t, mcpTraceID, "mcp", id[:strings.IndexByte(id, '"')], 1)
	})
}

// executionIDOf reads the execution_id of a call's answer.
func executionIDOf(t *testing.T, raw string) string {
	t.Helper()
	const key = `"execution_id":"`
	i := strings.Index(raw, key)
	if i < 0 {
		t.Fatalf("no execution_id in %s", raw)
	}
	id := raw[i+len(key):]
	return id[:strings.IndexByte(id, '"')]
}

// TestBlackBoxTracingOffSendsNothing: without an OTLP endpoint in the
// environment nothing is exported, and no trace context is passed on.
// The node is pointed at the receiver all the same, by the variables
// that do not turn tracing on, and stopped, so that a flush would have
// reached it.
func TestBlackBoxTracingOffSendsNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	rcv := startOTLPReceiver(t)
	n, up := startTracedNode(t, bin, "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="+rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=10")
	status, raw := tracedPost(t, n.URL+"/v1/tools/call", "00-"+httpTraceID+"-"+callerSpan+"-01",
		`{"tool":"order","arguments":{},"request_id":"untraced"}`)
	if status != http.StatusOK {
		t.Fatalf("call: %d %s", status, raw)
	}
	if err := n.Stop(15 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if got := up.traceparents(); len(got) != 1 || got[0] != "" {
		t.Errorf("the upstream's requests carried traceparent %q, want one request without", got)
	}
	if c := rcv.count(); c != 0 {
		t.Errorf("the receiver got %d exports with tracing off", c)
	}
}
