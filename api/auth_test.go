package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

const (
	plannerToken = "tok-planner-0123456789"
	allToken     = "tok-all-0123456789"
	adminToken   = "tok-admin-0123456789"
)

func authConfig() api.Config {
	return api.Config{Auth: api.Auth{
		Tokens: []api.Token{
			{Principal: "planner", Secret: plannerToken, Tools: []string{"echo", "create_order"}},
			{Principal: "everything", Secret: allToken, Tools: []string{"*"}},
			{Principal: "nothing", Secret: "tok-nothing-0123456789"},
		},
		AdminToken: adminToken,
	},
		// The tests of this file fail on purpose, many times over; the
		// limit on failures is tested in authguard_test.go.
		AuthFailures: api.AuthFailures{PerMinute: -1},
	}
}

var allTools = []engine.ToolInfo{{Name: "create_order"}, {Name: "echo"}, {Name: "sleep"}}

// authServer serves a runtime that records callers, with authConfig.
func authServer(t *testing.T, cfg api.Config) (*httptest.Server, *last[engine.Caller]) {
	t.Helper()
	callers := new(last[engine.Caller])
	rec := func(_ context.Context, caller engine.Caller, _ string) (store.Record, error) {
		callers.set(caller)
		return completedRecord(), nil
	}
	srv := newTestServer(t, &fakeRuntime{
		tb: t,
		call: func(_ context.Context, caller engine.Caller, _ engine.Request) (engine.Response, error) {
			callers.set(caller)
			return engine.Response{Record: completedRecord()}, nil
		},
		tools:     func() []engine.ToolInfo { return allTools },
		execution: rec,
		cancel:    rec,
		lookup: func(_ context.Context, caller engine.Caller, _, _ string) (store.Record, error) {
			callers.set(caller)
			return completedRecord(), nil
		},
		list: func(_ context.Context, caller engine.Caller, _ engine.ListRequest) (store.Page, error) {
			callers.set(caller)
			return store.Page{}, nil
		},
		resolve: func(_ context.Context, caller engine.Caller, _ string, _ engine.Resolution) (store.Record, error) {
			callers.set(caller)
			return completedRecord(), nil
		},
	}, cfg)
	return srv, callers
}

func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

func TestAuthRefusesMissingAndUnknownTokens(t *testing.T) {
	srv, callers := authServer(t, authConfig())
	for _, tc := range []struct {
		name, authorization string
	}{
		{"no token", ""},
		{"unknown token", "Bearer nope"},
		{"empty bearer", "Bearer "},
		{"blank bearer", "Bearer    "},
		{"scheme only", "Bearer"},
		{"basic", "Basic " + plannerToken},
		{"no scheme", plannerToken},
		{"token prefix", "Bearer " + plannerToken[:len(plannerToken)-1]},
		{"token with suffix", "Bearer " + plannerToken + "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Content-Type": "application/json", "Authorization": tc.authorization}
			for _, r := range []request{
				{method: http.MethodPost, path: callPath, body: strings.NewReader(`{"tool":"echo"}`), header: h},
				// Authentication comes before decoding.
				{method: http.MethodPost, path: callPath, body: strings.NewReader(`{"tool":`), header: h},
				{method: http.MethodGet, path: "/v1/tools", header: h},
				{method: http.MethodGet, path: "/v1/executions/exec_1", header: h},
				{method: http.MethodGet, path: "/v1/executions?request_id=r", header: h},
				{method: http.MethodGet, path: "/v1/executions?session_id=s", header: h},
				{method: http.MethodPost, path: "/v1/executions/exec_1/cancel", header: h},
				{method: http.MethodPost, path: "/v1/executions/exec_1/resolve", body: strings.NewReader(`{"status":"released"}`), header: h},
			} {
				a := send(t, srv, r)
				wantError(t, a, http.StatusUnauthorized, store.CodeUnauthorized)
				if h := a.header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
					t.Errorf("%s %s: WWW-Authenticate = %q", r.method, r.path, h)
				}
			}
			if _, n := callers.get(); n != 0 {
				t.Errorf("the runtime was called %d times without authentication", n)
			}
		})
	}
}

func TestAuthCallers(t *testing.T) {
	srv, callers := authServer(t, authConfig())
	for _, tc := range []struct {
		name, authorization string
		want                engine.Caller
	}{
		{"planner", "Bearer " + plannerToken, engine.Caller{Principal: "planner"}},
		{"lower-case scheme", "bearer " + plannerToken, engine.Caller{Principal: "planner"}},
		{"all tools", "Bearer " + allToken, engine.Caller{Principal: "everything"}},
		{"admin", "Bearer " + adminToken, engine.Caller{Principal: api.AdminPrincipal, Admin: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v1/executions/exec_1", "/v1/executions?request_id=r", "/v1/executions?session_id=s"} {
				wantJSON(t, get(t, srv, path, "Authorization", tc.authorization), http.StatusOK)
				if got := withoutTools(callers.mustGet(t)); got != tc.want {
					t.Errorf("GET %s: caller = %+v, want %+v", path, got, tc.want)
				}
			}
			for path, body := range map[string]string{
				"/v1/executions/exec_1/cancel":  `{}`,
				"/v1/executions/exec_1/resolve": `{"status":"released"}`,
			} {
				wantJSON(t, post(t, srv, path, body, "Authorization", tc.authorization), http.StatusOK)
				if got := withoutTools(callers.mustGet(t)); got != tc.want {
					t.Errorf("POST %s: caller = %+v, want %+v", path, got, tc.want)
				}
			}
			wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`, "Authorization", tc.authorization), http.StatusOK)
			if got := withoutTools(callers.mustGet(t)); got != tc.want {
				t.Errorf("call: caller = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// withoutTools returns c without its allow-list, for comparing the rest
// (TestAuthToolAllowList checks the allow-list).
func withoutTools(c engine.Caller) engine.Caller {
	c.Tools = nil
	return c
}

// TestAuthToolAllowList checks a token's tool allow-list: the caller the
// runtime gets carries it, and the runtime's verdict reaches the client
// (403 FORBIDDEN, nothing reserved or run, for a tool outside it).
func TestAuthToolAllowList(t *testing.T) {
	srv, callers := authServer(t, authConfig())
	rt := newEngine(t, "create_order", "sleep")
	real := newTestServer(t, rt, authConfig())
	for i, tc := range []struct {
		token, tool string
		allowed     bool
	}{
		{plannerToken, "echo", true},
		{plannerToken, "create_order", true},
		{plannerToken, "sleep", false},
		{plannerToken, "*", false},
		{plannerToken, "Echo", false},
		{allToken, "sleep", true},
		{allToken, "no_such_tool", true}, // the runtime answers UNKNOWN_TOOL
		{adminToken, "sleep", true},
		{"tok-nothing-0123456789", "echo", false},
	} {
		t.Run(tc.token+" "+tc.tool, func(t *testing.T) {
			body := `{"tool":"` + tc.tool + `","request_id":"r` + strconv.Itoa(i) + `"}`
			post(t, srv, callPath, body, bearer(tc.token)...)
			if got := callers.mustGet(t).MayCall(tc.tool); got != tc.allowed {
				t.Errorf("the caller the runtime got may call %q: %v, want %v", tc.tool, got, tc.allowed)
			}

			before, _ := rt.Store().Stats(t.Context())
			a := post(t, real, callPath, body, bearer(tc.token)...)
			after, _ := rt.Store().Stats(t.Context())
			switch {
			case !tc.allowed:
				wantError(t, a, http.StatusForbidden, store.CodeForbidden)
				if after.Entries != before.Entries {
					t.Errorf("a forbidden call reserved a record")
				}
			case tc.tool == "no_such_tool":
				wantError(t, a, http.StatusNotFound, store.CodeUnknownTool)
			default:
				wantJSON(t, a, http.StatusOK)
			}
		})
	}
}

func TestAuthListsAllowedTools(t *testing.T) {
	srv, _ := authServer(t, authConfig())
	for _, tc := range []struct {
		token string
		want  []string
	}{
		{plannerToken, []string{"create_order", "echo"}},
		{allToken, []string{"create_order", "echo", "sleep"}},
		{adminToken, []string{"create_order", "echo", "sleep"}},
		{"tok-nothing-0123456789", []string{}},
	} {
		m := wantJSON(t, get(t, srv, "/v1/tools", bearer(tc.token)...), http.StatusOK)
		list, ok := m["tools"].([]any)
		if !ok {
			t.Fatalf("tools = %v, want a list", m["tools"])
		}
		names := []string{}
		for _, v := range list {
			names = append(names, v.(map[string]any)["name"].(string))
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("token %s sees tools %v, want %v", tc.token, names, tc.want)
		}
	}
}

func TestAuthOffIsAnonymousAdmin(t *testing.T) {
	srv, callers := authServer(t, api.Config{})
	// A token is ignored when auth is off.
	for _, kv := range [][]string{nil, bearer("anything")} {
		wantJSON(t, post(t, srv, callPath, `{"tool":"sleep"}`, kv...), http.StatusOK)
		if got := callers.mustGet(t); got != (engine.Caller{Principal: engine.AnonymousPrincipal, Admin: true}) {
			t.Errorf("caller = %+v, want anonymous admin", got)
		}
	}
	m := wantJSON(t, get(t, srv, "/v1/tools"), http.StatusOK)
	if list, _ := m["tools"].([]any); len(list) != len(allTools) {
		t.Errorf("tools = %v, want all %d", m["tools"], len(allTools))
	}
}

func TestAuthAdminTokenAlone(t *testing.T) {
	srv, callers := authServer(t, api.Config{Auth: api.Auth{AdminToken: adminToken}})
	wantError(t, post(t, srv, callPath, `{"tool":"echo"}`), http.StatusUnauthorized, store.CodeUnauthorized)
	wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`, bearer(adminToken)...), http.StatusOK)
	if got := callers.mustGet(t); !got.Admin || got.Principal != api.AdminPrincipal {
		t.Errorf("caller = %+v, want admin", got)
	}
}

func TestAuthHealthNeedsNoToken(t *testing.T) {
	srv, _ := authServer(t, authConfig())
	wantJSON(t, get(t, srv, "/healthz"), http.StatusOK)
	wantJSON(t, get(t, srv, "/readyz"), http.StatusOK)
	// Unknown routes are 404 whether or not a token is given.
	wantError(t, get(t, srv, "/v1/nope"), http.StatusNotFound, store.CodeNotFound)
}

func TestAuthValidate(t *testing.T) {
	valid := authConfig().Auth
	if err := valid.Validate(); err != nil {
		t.Fatalf("Validate(valid) = %v", err)
	}
	if err := (api.Auth{}).Validate(); err != nil {
		t.Errorf("Validate(off) = %v", err)
	}
	if (api.Auth{}).Enabled() || !valid.Enabled() || !(api.Auth{AdminToken: "x"}).Enabled() {
		t.Errorf("Enabled is wrong")
	}
	for _, tc := range []struct {
		name string
		auth api.Auth
	}{
		{"empty secret", api.Auth{Tokens: []api.Token{{Principal: "p", Secret: ""}}}},
		{"empty principal", api.Auth{Tokens: []api.Token{{Principal: "", Secret: "s"}}}},
		{"shared secret", api.Auth{Tokens: []api.Token{{Principal: "p", Secret: "s"}, {Principal: "q", Secret: "s"}}}},
		{"admin's secret", api.Auth{AdminToken: "s", Tokens: []api.Token{{Principal: "p", Secret: "s"}}}},
		{"metrics token is a principal's", api.Auth{MetricsToken: "s", Tokens: []api.Token{{Principal: "p", Secret: "s"}}}},
		{"metrics token is the admin's", api.Auth{MetricsToken: "s", AdminTokenSHA256: "043a718774c572bd8a25adbeb1bfcd5c0256ae11cecf9f9c3f925d0e52beaf89"}},
		{"metrics token as secret and SHA-256", api.Auth{MetricsToken: "s", MetricsTokenSHA256: "043a718774c572bd8a25adbeb1bfcd5c0256ae11cecf9f9c3f925d0e52beaf89"}},
		{"principal admin", api.Auth{Tokens: []api.Token{{Principal: api.AdminPrincipal, Secret: "s"}}}},
		{"principal anonymous", api.Auth{Tokens: []api.Token{{Principal: engine.AnonymousPrincipal, Secret: "s"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.auth.Validate(); err == nil {
				t.Errorf("Validate = nil, want an error")
			}
			if _, err := api.New(&fakeRuntime{tb: t}, api.Config{Auth: tc.auth}); err == nil {
				t.Errorf("New accepted an invalid Auth")
			}
		})
	}
}

func TestNewRefusesNilRuntime(t *testing.T) {
	if _, err := api.New(nil, api.Config{}); err == nil {
		t.Errorf("New(nil) = nil error")
	}
}
