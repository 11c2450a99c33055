package api_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// TestOneLogLinePerCall checks the call log: one line per call with the
// principal, tool, request_id, execution_id, outcome, status and duration;
// an error answer names its code and the execution it is about; a call
// refused before its body was read still gets its line; arguments are
// never logged.
func TestOneLogLinePerCall(t *testing.T) {
	logs := &syncBuffer{}
	cfg := authConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	rec := completedRecord()
	calls := 0
	rt := &fakeRuntime{tb: t, call: func(_ context.Context, _ engine.Caller, req engine.Request) (engine.Response, error) {
		calls++
		if calls == 2 {
			return engine.Response{}, &store.ConflictError{Record: rec}
		}
		return engine.Response{Record: rec, Replayed: calls > 1}, nil
	}}
	srv := newTestServer(t, rt, cfg)
	planner := []string{"Authorization", "Bearer " + plannerToken}
	body := `{"tool":"echo","arguments":{"secret":"s3cr3t-arg"},"request_id":"r-1","session_id":"s-1"}`
	post(t, srv, "/v1/tools/call", body, planner...)
	post(t, srv, "/v1/tools/call", body, planner...)
	post(t, srv, "/v1/tools/call", body, planner...)
	post(t, srv, "/v1/tools/call", body) // no token

	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, "msg=call ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 4 {
		t.Fatalf("%d call lines, want 4:\n%s", len(lines), logs.String())
	}
	want := []string{
		`principal=planner tool=echo request_id=r-1 session_id=s-1 execution_id=` + rec.ExecutionID + ` outcome=ran status=completed transport=http http_status=200 duration_ms=`,
		`principal=planner tool=echo request_id=r-1 session_id=s-1 execution_id=` + rec.ExecutionID + ` outcome=conflict code=IDEMPOTENCY_CONFLICT transport=http http_status=409 duration_ms=`,
		`principal=planner tool=echo request_id=r-1 session_id=s-1 execution_id=` + rec.ExecutionID + ` outcome=replayed status=completed transport=http http_status=200 duration_ms=`,
		`principal="" tool="" request_id="" session_id="" execution_id="" outcome=denied code=UNAUTHORIZED transport=http http_status=401 duration_ms=`,
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d:\n got %s\nwant …%s…", i+1, lines[i], w)
		}
	}
	if strings.Contains(logs.String(), "s3cr3t-arg") {
		t.Error("the arguments were logged")
	}
}
