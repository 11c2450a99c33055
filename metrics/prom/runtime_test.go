package prom_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/internal/buildinfo"
	"github.com/carmyhq/carmy/metrics/prom"
	"github.com/carmyhq/carmy/tests/testutil"
)

// TestRuntimeMetrics pins what GET /metrics exports of the runtime: the
// names, types and help of its families, and the labels of its series
// after one recorded call (a reserve, a run and a completion).
func TestRuntimeMetrics(t *testing.T) {
	app := newApp(t)
	mustAdd(t, app, carmy.ToolSpec{Name: "echo", Func: func(_ context.Context, c carmy.Call) (any, error) { return c.Arguments, nil }})
	addr := testutil.Serve(t, app, api.Config{Metrics: prom.New(app.Engine())})
	resp, err := http.Post("http://"+addr+"/v1/tools/call", "application/json", strings.NewReader(`{"tool":"echo","request_id":"r1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, line := range []string{
		"# HELP carmy_tool_duration_seconds How long tools ran, by tool and recorded status (completed, failed, timed_out, cancelled).",
		"# TYPE carmy_tool_duration_seconds histogram",
		"# HELP carmy_store_write_duration_seconds Store writes of calls: reserve (by outcome: reserved, replay, conflict, uncertain, error) " +
			"and complete (ok, error). A replicated store's reserve and complete are Raft commits; a replay of a finished record is answered locally.",
		"# TYPE carmy_store_write_duration_seconds histogram",
		"# HELP carmy_store_entries Records in the store (running, interrupted and finished), as this node has applied them.",
		"# TYPE carmy_store_entries gauge",
		"# HELP carmy_store_capacity The bound on records (--max-entries); calls answer IDEMPOTENCY_CAPACITY when it is reached.",
		"# TYPE carmy_store_capacity gauge",
		"# HELP carmy_executions_running Tools running on this node now.",
		"# TYPE carmy_executions_running gauge",
		`carmy_tool_duration_seconds_count{status="completed",tool="echo"} 1`,
		`carmy_store_write_duration_seconds_count{op="reserve",outcome="reserved"} 1`,
		`carmy_store_write_duration_seconds_count{op="complete",outcome="ok"} 1`,
		`carmy_tool_duration_seconds_bucket{status="completed",tool="echo",le="0.0002"}`,
		`carmy_tool_duration_seconds_bucket{status="completed",tool="echo",le="60"}`,
		"carmy_store_entries 1",
		"carmy_store_capacity 10000",
		"carmy_executions_running 0",
		"# TYPE go_goroutines gauge",
		"# TYPE carmy_build_info gauge",
		fmt.Sprintf(`carmy_build_info{commit=%q,go_version=%q,version=%q} 1`, buildinfo.Get().Commit, buildinfo.Get().GoVersion, buildinfo.Version()),
	} {
		if !strings.Contains(text, line+"\n") && !strings.Contains(text, line+" ") {
			t.Errorf("GET /metrics lacks %q", line)
		}
	}
}
