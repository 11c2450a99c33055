package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// TestAuthMaxEntries checks the per-principal bound each caller carries:
// a token's own MaxEntries, else Auth.MaxEntriesPerPrincipal, which also
// bounds the admin and, with auth off, the anonymous caller.
func TestAuthMaxEntries(t *testing.T) {
	cfg := authConfig()
	cfg.Auth.Tokens[0].MaxEntries = 5 // planner
	cfg.Auth.MaxEntriesPerPrincipal = 3
	srv, callers := authServer(t, cfg)
	for _, tc := range []struct {
		token string
		want  engine.Caller
	}{
		{plannerToken, engine.Caller{Principal: "planner", MaxEntries: 5}},
		{allToken, engine.Caller{Principal: "everything", MaxEntries: 3}},
		{adminToken, engine.Caller{Principal: api.AdminPrincipal, Admin: true, MaxEntries: 3}},
	} {
		wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`, bearer(tc.token)...), http.StatusOK)
		if got := withoutTools(callers.mustGet(t)); got != tc.want {
			t.Errorf("caller = %+v, want %+v", got, tc.want)
		}
	}

	// Without a default, a token without its own bound is unbounded.
	srv, callers = authServer(t, authConfig())
	wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`, bearer(allToken)...), http.StatusOK)
	if got := callers.mustGet(t); got.MaxEntries != 0 {
		t.Errorf("caller = %+v, want no bound", got)
	}

	// Auth off: the default bounds the anonymous caller, and does not turn
	// auth on.
	off := api.Auth{MaxEntriesPerPrincipal: 4}
	if off.Enabled() {
		t.Fatal("a default bound turned auth on")
	}
	srv, callers = authServer(t, api.Config{Auth: off})
	wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`), http.StatusOK)
	if got := callers.mustGet(t); got != (engine.Caller{Principal: engine.AnonymousPrincipal, Admin: true, MaxEntries: 4}) {
		t.Errorf("caller = %+v, want the anonymous admin bounded to 4", got)
	}
}

func TestAuthValidateRefusesNegativeMaxEntries(t *testing.T) {
	for name, a := range map[string]api.Auth{
		"default": {MaxEntriesPerPrincipal: -1},
		"token":   {Tokens: []api.Token{{Principal: "p", Secret: "s", MaxEntries: -1}}},
	} {
		if err := a.Validate(); err == nil {
			t.Errorf("%s: Validate accepted a negative bound", name)
		}
		if _, err := api.New(&fakeRuntime{tb: t}, api.Config{Auth: a}); err == nil {
			t.Errorf("%s: New accepted a negative bound", name)
		}
	}
}

// TestQuotaErrorEnvelope checks the answer to a principal at its quota:
// 503 IDEMPOTENCY_CAPACITY naming the principal, whatever wraps the error.
func TestQuotaErrorEnvelope(t *testing.T) {
	tc := errorCase{
		name:   "principal quota",
		err:    fmt.Errorf("reserve: %w", &store.QuotaError{Principal: "planner", Quota: 2}),
		status: 503, code: "IDEMPOTENCY_CAPACITY",
		extra: map[string]any{"principal": "planner"},
		// Every 503 carries Retry-After, as the store-wide capacity does.
		retryAfter: true,
	}
	srv := newTestServer(t, &fakeRuntime{tb: t, call: func(_ context.Context, _ engine.Caller, _ engine.Request) (engine.Response, error) {
		return engine.Response{}, tc.err
	}}, api.Config{})
	a := post(t, srv, callPath, `{"tool":"echo","request_id":"r1"}`)
	checkErrorCase(t, a, tc)
	e := wantError(t, a, 503, "IDEMPOTENCY_CAPACITY")
	if msg, _ := e["message"].(string); msg != `reserve: principal "planner" holds its quota of 2 records` {
		t.Errorf("message = %q, want the principal and its quota", msg)
	}
}
