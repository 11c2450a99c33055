package api_test

// Tests of /mcp through the API server (docs/mcp.md with the policies of docs/api.md): rate
// limits and quotas hold for tools/call, the metrics count MCP calls apart
// from HTTP ones, the call log names the transport, and a tool registered
// while the node serves is listed and callable at once.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/mcpclient"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/tests/testutil"
)

// mcpPost sends one JSON-RPC message to base/mcp as token and returns the
// status and the decoded answer.
// The version is 2025-11-25, whose requests name no method in a header.
func mcpPost(t *testing.T, base, token, body string) (int, map[string]any) {
	t.Helper()
	c := mcpclient.Client{URL: base + "/mcp", Version: mcpversion.V20251125, Token: token}
	a, err := c.Post(t.Context(), "", "", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := a.Decode(&out); err != nil {
		t.Fatalf("POST /mcp: %v", err)
	}
	return a.Status, out
}

// mcpCallCode sends a tools/call and returns the carmy/error_code of its
// result ("" for a call answered with its record).
func mcpCallCode(t *testing.T, base, token, tool, args, requestID string) string {
	t.Helper()
	meta := ""
	if requestID != "" {
		meta = `,"_meta":{"carmy/request_id":"` + requestID + `"}`
	}
	status, msg := mcpPost(t, base, token, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+meta+`}}`)
	res, ok := msg["result"].(map[string]any)
	if status != http.StatusOK || !ok {
		t.Fatalf("tools/call %s: %d %v", tool, status, msg)
	}
	m, _ := res["_meta"].(map[string]any)
	code, _ := m["carmy/error_code"].(string)
	return code
}

func scrapeURL(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return scrape(t, answer{status: resp.StatusCode, header: resp.Header, body: body})
}

func TestMCPRateLimitQuotaMetricsAndLog(t *testing.T) {
	var logs syncBuffer
	app := carmy.App(carmy.WithLogger(quietLogger()), carmy.WithDrainTimeout(time.Second))
	if err := app.AddDemoTools(); err != nil {
		t.Fatal(err)
	}
	cfg := api.Config{Auth: oasAuth(), RateLimit: api.RateLimit{PerSecond: 0.001, Burst: 3},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	base := "http://" + testutil.Serve(t, app, cfg)

	// limited may hold one record: a second identity is over its quota.
	if code := mcpCallCode(t, base, oasLimited, "echo", `{"a":1}`, "q-1"); code != "" {
		t.Fatalf("first call: %s", code)
	}
	if code := mcpCallCode(t, base, oasLimited, "echo", `{"a":1}`, "q-2"); code != "IDEMPOTENCY_CAPACITY" {
		t.Errorf("a second identity over the quota: %q, want IDEMPOTENCY_CAPACITY", code)
	}
	// Its burst of 3 is spent: the next tools/call is RATE_LIMITED.
	if code := mcpCallCode(t, base, oasLimited, "echo", `{"a":1}`, "q-1"); code != "" {
		t.Errorf("third call (a replay): %q", code)
	}
	if code := mcpCallCode(t, base, oasLimited, "echo", `{"a":1}`, "q-1"); code != "RATE_LIMITED" {
		t.Errorf("fourth call: %q, want RATE_LIMITED", code)
	}
	// Every method counts, not only tools/call (issue 28): a tools/list
	// over the rate is 429, JSON-RPC error -32029 with the envelope.
	if status, msg := mcpPost(t, base, oasLimited, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); status != http.StatusTooManyRequests ||
		fmt.Sprint(msg["error"]) == "<nil>" || !strings.Contains(fmt.Sprint(msg["error"]), "code:RATE_LIMITED") {
		t.Errorf("tools/list after the limit: %d %v, want 429 RATE_LIMITED", status, msg)
	}
	// The admin is never limited.
	for i := range 4 {
		if code := mcpCallCode(t, base, oasAdmin, "echo", `{}`, ""); code != "" {
			t.Errorf("admin call %d: %q", i, code)
		}
	}

	m := scrapeURL(t, base)
	for outcome, want := range map[string]float64{"ran": 5, "replayed": 1, "capacity": 1, "rate_limited": 1, "conflict": 0} {
		if got := m[`carmy_calls_total{outcome="`+outcome+`",transport="mcp"}`]; got != want {
			t.Errorf(`carmy_calls_total{outcome=%q,transport="mcp"} = %v, want %v`, outcome, got, want)
		}
		if got := m[`carmy_call_duration_seconds_count{outcome="`+outcome+`",transport="mcp"}`]; got != want {
			t.Errorf(`carmy_call_duration_seconds_count{outcome=%q,transport="mcp"} = %v, want %v`, outcome, got, want)
		}
	}
	if got := m[`carmy_calls_total{outcome="ran",transport="http"}`]; got != 0 {
		t.Errorf(`carmy_calls_total{outcome="ran",transport="http"} = %v: MCP calls counted as HTTP ones`, got)
	}

	wantLine := `msg=call principal=limited tool=echo request_id=q-2 session_id="" execution_id="" outcome=capacity code=IDEMPOTENCY_CAPACITY transport=mcp duration_ms=`
	if !strings.Contains(logs.String(), wantLine) {
		t.Errorf("no call line %q in:\n%s", wantLine, logs.String())
	}
	if strings.Contains(logs.String(), "server session") {
		t.Errorf("the SDK's per-request lines are logged:\n%s", logs.String())
	}
}

func TestMCPToolRegisteredWhileServing(t *testing.T) {
	app, base := startOASNode(t, api.Config{})
	list := func() string {
		_, msg := mcpPost(t, base, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		b, _ := json.Marshal(msg)
		return string(b)
	}
	if strings.Contains(list(), `"late"`) {
		t.Fatal("late listed before it is registered")
	}
	err := app.AddTool(engine.ToolSpec{Name: "late", Description: "Registered later.",
		Func: func(context.Context, engine.Call) (any, error) { return "ok", nil }})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(list(), `"name":"late"`) {
		t.Errorf("late not listed once registered: %s", list())
	}
	// Its data is a string: structuredContent wraps it as {"value": …}.
	_, msg := mcpPost(t, base, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"late"}}`)
	res, _ := msg["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	content, _ := res["content"].([]any)
	first, _ := content[0].(map[string]any)
	if sc["value"] != "ok" || first["text"] != `"ok"` || res["isError"] == true {
		t.Errorf("late's result: %v", msg)
	}
}
