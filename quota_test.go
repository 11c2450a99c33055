package carmy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// quotaAnswer is one HTTP answer, decoded.
type quotaAnswer struct {
	status int
	header http.Header
	raw    string
	body   map[string]any
}

// errorMember returns error.<name> of an error envelope.
func (a quotaAnswer) errorMember(name string) any {
	e, _ := a.body["error"].(map[string]any)
	return e[name]
}

func quotaCall(t *testing.T, addr, token, body string) quotaAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/tools/call", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := quotaAnswer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("answer is not JSON: %q", raw)
	}
	return a
}

func wantQuotaAnswer(t *testing.T, a quotaAnswer, principal string) {
	t.Helper()
	if a.status != http.StatusServiceUnavailable || a.errorMember("code") != "IDEMPOTENCY_CAPACITY" ||
		a.errorMember("principal") != principal {
		t.Fatalf("answer %d %s; want 503 IDEMPOTENCY_CAPACITY naming %q", a.status, a.raw, principal)
	}
}

// TestQuotaOverHTTP serves the real runtime on an in-memory store with a
// token bounded to 2 records: its third new identity is refused with 503
// IDEMPOTENCY_CAPACITY naming it, without running the tool, while its
// held identities are answered and another principal goes on.
func TestQuotaOverHTTP(t *testing.T) {
	app := newApp(t)
	app.IdempotencyStore(store.NewMemory(100))
	var c counter
	mustAdd(t, app, carmy.ToolSpec{Name: "count", Func: c.fn})
	addr := testutil.Serve(t, app, api.Config{Auth: api.Auth{Tokens: []api.Token{
		{Principal: "planner", Secret: "tok-planner", Tools: []string{"*"}, MaxEntries: 2},
		{Principal: "reporter", Secret: "tok-reporter", Tools: []string{"*"}},
	}}})

	first := quotaCall(t, addr, "tok-planner", `{"tool":"count","request_id":"r1"}`)
	if first.status != http.StatusOK {
		t.Fatalf("first call: %d %s", first.status, first.raw)
	}
	if a := quotaCall(t, addr, "tok-planner", `{"tool":"count","request_id":"r2"}`); a.status != http.StatusOK {
		t.Fatalf("second call: %d %s", a.status, a.raw)
	}
	full := quotaCall(t, addr, "tok-planner", `{"tool":"count","request_id":"r3"}`)
	wantQuotaAnswer(t, full, "planner")
	if msg, _ := full.errorMember("message").(string); !strings.Contains(msg, `"planner"`) || !strings.Contains(msg, "2 records") {
		t.Errorf("message %q: want the principal and its quota", msg)
	}
	if n := c.runs.Load(); n != 2 {
		t.Fatalf("the tool ran %d times, want 2: a refused call must not run it", n)
	}
	// Another session is the same principal, under the same quota.
	wantQuotaAnswer(t, quotaCall(t, addr, "tok-planner", `{"tool":"count","request_id":"r3","session_id":"other"}`), "planner")

	// The planner's held identities are answered as ever.
	again := quotaCall(t, addr, "tok-planner", `{"tool":"count","request_id":"r1"}`)
	if again.status != http.StatusOK || again.body["replayed"] != true || again.header.Get("Idempotent-Replayed") != "true" ||
		again.body["execution_id"] != first.body["execution_id"] {
		t.Fatalf("retry of r1 at the quota: %d %s, want the replay of %v", again.status, again.raw, first.body["execution_id"])
	}
	if a := quotaCall(t, addr, "tok-planner", `{"tool":"count","request_id":"r1","arguments":{"x":1}}`); a.status != http.StatusConflict ||
		a.errorMember("code") != "IDEMPOTENCY_CONFLICT" {
		t.Fatalf("r1 with other arguments at the quota: %d %s, want 409 IDEMPOTENCY_CONFLICT", a.status, a.raw)
	}
	// A call without request_id records nothing, so no quota applies.
	if a := quotaCall(t, addr, "tok-planner", `{"tool":"count"}`); a.status != http.StatusOK {
		t.Fatalf("unrecorded call at the quota: %d %s", a.status, a.raw)
	}

	// Another principal still reserves.
	for _, req := range []string{"r1", "r2", "r3"} {
		if a := quotaCall(t, addr, "tok-reporter", `{"tool":"count","request_id":"`+req+`"}`); a.status != http.StatusOK || a.body["replayed"] != false {
			t.Fatalf("reporter %s: %d %s", req, a.status, a.raw)
		}
	}

	// The refusal is counted as capacity.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `carmy_calls_total{outcome="capacity",transport="http"} 2`) {
		t.Errorf("metrics do not count the 2 refusals as capacity")
	}
}

// TestQuotaDefaultBoundsEveryPrincipal checks Auth.MaxEntriesPerPrincipal:
// it bounds tokens without their own max_entries and the admin, and a
// token's own bound beats it.
func TestQuotaDefaultBoundsEveryPrincipal(t *testing.T) {
	app := newApp(t)
	app.IdempotencyStore(store.NewMemory(100))
	var c counter
	mustAdd(t, app, carmy.ToolSpec{Name: "count", Func: c.fn})
	addr := testutil.Serve(t, app, api.Config{Auth: api.Auth{
		Tokens: []api.Token{
			{Principal: "planner", Secret: "tok-planner", Tools: []string{"*"}, MaxEntries: 2},
			{Principal: "reporter", Secret: "tok-reporter", Tools: []string{"*"}},
		},
		AdminToken:             "tok-admin",
		MaxEntriesPerPrincipal: 1,
	}})
	for _, tc := range []struct {
		token, principal string
		quota            int
	}{{"tok-planner", "planner", 2}, {"tok-reporter", "reporter", 1}, {"tok-admin", api.AdminPrincipal, 1}} {
		for i := range tc.quota {
			body := `{"tool":"count","request_id":"ok-` + string(rune('a'+i)) + `"}`
			if a := quotaCall(t, addr, tc.token, body); a.status != http.StatusOK {
				t.Fatalf("%s call %d: %d %s", tc.principal, i, a.status, a.raw)
			}
		}
		wantQuotaAnswer(t, quotaCall(t, addr, tc.token, `{"tool":"count","request_id":"one-too-many"}`), tc.principal)
	}
}
