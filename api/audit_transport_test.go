package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// auditLine returns the first audit line of logs holding every one of
// parts, or "".
func auditLine(logs string, parts ...string) string {
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, "msg=audit ") {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return line
		}
	}
	return ""
}

// TestAuditEveryTransport: a cancel, a resolution or a release is audited
// the same way whoever asks for it — POST /v1/executions/{id}/cancel,
// carmy.cancel, tasks/cancel, carmy.resolve, a reconcile probe — one
// msg=audit line with action, principal, target (the execution id),
// outcome and transport, refusals included, and one count in
// carmy_admin_actions_total.
func TestAuditEveryTransport(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	app := carmy.App(carmy.WithLogger(logger), carmy.WithDrainTimeout(time.Second))
	if err := app.AddDemoTools(); err != nil {
		t.Fatal(err)
	}
	started, unblock := make(chan string, 4), make(chan struct{})
	defer close(unblock)
	for _, spec := range []carmy.ToolSpec{blockTool(started, unblock), {
		Name: "probed", Timeout: 5 * time.Second,
		Func: func(context.Context, carmy.Call) (any, error) { return nil, nil },
		// Not found: the probe releases the reservation.
		Probe: func(context.Context, engine.ProbeCall) (engine.ProbeAnswer, error) { return engine.ProbeAnswer{}, nil },
	}} {
		if err := app.AddTool(spec); err != nil {
			t.Fatal(err)
		}
	}
	base := "http://" + testutil.Serve(t, app, api.Config{})
	const who = engine.AnonymousPrincipal

	// running starts a call of block with requestID and returns its
	// execution id once it runs.
	running := func(requestID string) string {
		t.Helper()
		go func() {
			resp, err := http.Post(base+"/v1/tools/call", "application/json",
				strings.NewReader(`{"tool":"block","request_id":"`+requestID+`"}`))
			if err == nil {
				resp.Body.Close()
			}
		}()
		<-started
		rec, err := app.Store().Lookup(t.Context(), store.Key{Principal: who, RequestID: requestID})
		if err != nil {
			t.Fatalf("Lookup %s: %v", requestID, err)
		}
		return rec.ExecutionID
	}
	tool := func(name, args string) map[string]any {
		t.Helper()
		_, msg := rpc(t, base, "", v1125, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"`+name+`","arguments":`+args+`}}`)
		return result(t, name, msg)
	}

	// HTTP.
	viaHTTP := running("over-http")
	resp, err := http.Post(base+"/v1/executions/"+viaHTTP+"/cancel", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// carmy.cancel.
	viaTool := running("over-tool")
	if r := tool("carmy.cancel", `{"execution_id":"`+viaTool+`"}`); r["isError"] == true {
		t.Fatalf("carmy.cancel: %v", r)
	}
	// tasks/cancel.
	_, created := rpc(t, base, "", v1125, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","task":{}}}`)
	viaTask := result(t, "task call", created)["task"].(map[string]any)["taskId"].(string)
	<-started
	if _, msg := rpc(t, base, "", v1125, `{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{"taskId":"`+viaTask+`"}}`); result(t, "tasks/cancel", msg)["status"] != "cancelled" {
		t.Fatalf("tasks/cancel: %v", msg)
	}
	// carmy.resolve: a release, and a refusal that names its target.
	released := interrupted(t, app, who, "over-resolve")
	if r := tool("carmy.resolve", `{"execution_id":"`+released+`","status":"released"}`); r["isError"] == true {
		t.Fatalf("carmy.resolve: %v", r)
	}
	if r := tool("carmy.resolve", `{"execution_id":"exec_nothing","status":"completed","data":1}`); metaOf(r)["carmy/error_code"] != "NOT_FOUND" {
		t.Fatalf("carmy.resolve of no execution: %v", r)
	}
	// A probe: not found, released.
	fp, err := store.Fingerprint("probed", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	res, err := app.Store().Reserve(t.Context(), store.Key{Principal: who, RequestID: "over-probe"}, fp,
		store.Execution{ID: engine.NewExecutionID(now), Tool: "probed", NodeID: "gone", StartedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.Store().MarkInterrupted(t.Context(), "gone"); err != nil {
		t.Fatal(err)
	}
	probed := res.Record.ExecutionID

	want := [][]string{
		{"action=cancel principal=" + who + " target=" + viaHTTP + " outcome=ok", "transport=http"},
		{"action=cancel principal=" + who + " target=" + viaTool + " outcome=ok", "transport=mcp"},
		{"action=cancel principal=" + who + " target=" + viaTask + " outcome=ok", "transport=mcp"},
		{"action=release principal=" + who + " target=" + released + " outcome=ok", "transport=mcp"},
		{"action=resolve principal=" + who + " target=exec_nothing outcome=NOT_FOUND", "transport=mcp"},
		{"action=release principal=probe target=" + probed + " outcome=ok", "transport=probe"},
	}
	wait.For(t, 30*time.Second, "every decision's audit line", func() error {
		got := logs.String()
		for _, w := range want {
			if auditLine(got, w...) == "" {
				return fmt.Errorf("no audit line with %q", w)
			}
		}
		return nil
	})
	got := logs.String()
	if strings.Contains(got, "reconcile probe: resolved") {
		t.Errorf("a probe's resolution is logged apart from the audit line:\n%s", got)
	}
	m := scrapeURL(t, base)
	for series, n := range map[string]float64{
		`carmy_admin_actions_total{action="cancel",outcome="ok"}`:         3,
		`carmy_admin_actions_total{action="release",outcome="ok"}`:        2,
		`carmy_admin_actions_total{action="resolve",outcome="NOT_FOUND"}`: 1,
	} {
		if m[series] != n {
			t.Errorf("%s = %v, want %v", series, m[series], n)
		}
	}
}
