package faultnet

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

const testKey = "s3cret"

// do sends one request to h; key "" sends no key header.
func do(t *testing.T, h http.Handler, method, key, body string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, "/internal/v1/faults", strings.NewReader(body))
	if key != "" {
		req.Header.Set(KeyHeader, key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type = %q, want application/json", method, ct)
	}
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s: body %q is not a JSON object: %v", method, rec.Body, err)
	}
	return rec, out
}

func wantStatus(t *testing.T, rec *httptest.ResponseRecorder, out map[string]any, status int, code string) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status = %d, want %d (body %s)", rec.Code, status, rec.Body)
	}
	if code != "" && out["error"] != code {
		t.Fatalf("error = %v, want %q (body %s)", out["error"], code, rec.Body)
	}
}

func decodeRulesBody(t *testing.T, rec *httptest.ResponseRecorder) Rules {
	t.Helper()
	var r Rules
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("answer %s: %v", rec.Body, err)
	}
	return r
}

func TestHandlerAuth(t *testing.T) {
	f := New()
	h := f.Handler(testKey)
	rec, out := do(t, h, http.MethodGet, "", "")
	wantStatus(t, rec, out, http.StatusUnauthorized, "unauthorized")
	rec, out = do(t, h, http.MethodGet, "wrong", "")
	wantStatus(t, rec, out, http.StatusForbidden, "forbidden")
	rec, out = do(t, h, http.MethodPut, "wrong", `{"drop_in":["10.0.0.1"]}`)
	wantStatus(t, rec, out, http.StatusForbidden, "forbidden")
	if got := f.Rules(); len(got.DropIn) != 0 {
		t.Fatalf("a refused PUT set the rules: %+v", got)
	}

	// Without a key, nobody may use it.
	open := f.Handler("")
	req := httptest.NewRequest(http.MethodGet, "/internal/v1/faults", nil)
	req.Header.Set(KeyHeader, "")
	rec = httptest.NewRecorder()
	open.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("empty key: status = %d, want 403", rec.Code)
	}
}

func TestHandlerRoundTrip(t *testing.T) {
	f := New()
	h := f.Handler(testKey)
	rec, out := do(t, h, http.MethodGet, testKey, "")
	wantStatus(t, rec, out, http.StatusOK, "")
	if rec.Body.String() != `{"drop_in":[],"drop_out":[]}`+"\n" {
		t.Fatalf("initial GET = %s", rec.Body)
	}

	rec, out = do(t, h, http.MethodPut, testKey, `{"drop_in":["10.0.0.1"],"drop_out":["::ffff:10.0.0.3","10.0.0.2"]}`)
	wantStatus(t, rec, out, http.StatusOK, "")
	want := Rules{DropIn: []string{"10.0.0.1"}, DropOut: []string{"10.0.0.2", "10.0.0.3"}}
	if got := decodeRulesBody(t, rec); !equalRules(got, want) {
		t.Fatalf("PUT answered %+v, want %+v", got, want)
	}
	rec, _ = do(t, h, http.MethodGet, testKey, "")
	if got := decodeRulesBody(t, rec); !equalRules(got, want) {
		t.Fatalf("GET = %+v, want %+v", got, want)
	}
	if got := f.Rules(); !equalRules(got, want) {
		t.Fatalf("Rules = %+v, want %+v", got, want)
	}

	// An empty object clears them.
	rec, out = do(t, h, http.MethodPut, testKey, `{}`)
	wantStatus(t, rec, out, http.StatusOK, "")
	if got := f.Rules(); len(got.DropIn)+len(got.DropOut) != 0 {
		t.Fatalf("after PUT {}, Rules = %+v", got)
	}
}

func TestHandlerRefusesBadBodies(t *testing.T) {
	f := New()
	if err := f.Set(Rules{DropIn: []string{"10.0.0.9"}}); err != nil {
		t.Fatal(err)
	}
	h := f.Handler(testKey)
	for _, body := range []string{
		``,
		`null`,
		`[]`,
		`{"drop_in":["10.0.0.1"],"bogus":true}`,
		`{"DropIn":["10.0.0.1"]}`,
		`{"drop_in":"10.0.0.1"}`,
		`{"drop_in":["10.0.0.1"]} {}`,
		`{"drop_in":["10.0.0.1"]} x`,
		`{"drop_in":["10.0.0.1:80"]}`,
		`{"drop_out":["no-such-host.invalid"]}`,
		`{"drop_in":[`,
	} {
		rec, out := do(t, h, http.MethodPut, testKey, body)
		if rec.Code != http.StatusBadRequest || out["error"] != "invalid" || out["message"] == "" {
			t.Errorf("PUT %q: %d %s, want 400 invalid with a message", body, rec.Code, rec.Body)
		}
	}
	if got := f.Rules(); !slices.Equal(got.DropIn, []string{"10.0.0.9"}) {
		t.Fatalf("refused PUTs changed the rules: %+v", got)
	}
	rec, out := do(t, h, http.MethodPut, testKey, `{"drop_in":["`+strings.Repeat("a", maxRulesBody)+`"]}`)
	wantStatus(t, rec, out, http.StatusBadRequest, "invalid")
}

func TestHandlerMethods(t *testing.T) {
	h := New().Handler(testKey)
	for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodPatch} {
		rec, out := do(t, h, m, testKey, `{}`)
		wantStatus(t, rec, out, http.StatusMethodNotAllowed, "method_not_allowed")
		if allow := rec.Header().Get("Allow"); allow != "GET, PUT" {
			t.Errorf("%s: Allow = %q", m, allow)
		}
	}
}

func equalRules(a, b Rules) bool {
	return slices.Equal(a.DropIn, b.DropIn) && slices.Equal(a.DropOut, b.DropOut)
}
