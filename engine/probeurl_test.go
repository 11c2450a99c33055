package engine

import (
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
)

// A request_id is any visible ASCII: put in a probe's path it must stay
// one segment, whatever it holds. The upstream here resolves the dot
// segments of the path it is sent (path.Clean), as RFC 3986 lets it: had
// "/orders/../status" reached it, it would have answered for /status, a
// resource of no execution, and its 200 would have been taken for the
// call's outcome.
func TestHTTPProbeKeepsAValueInItsSegment(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.RequestURI)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if path.Clean(r.URL.EscapedPath()) == "/status" {
			io.WriteString(w, `{"someone":"else"}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	})
	h := HTTPTool{URL: srv.URL + "/orders", ReconcileURL: srv.URL + "/orders/{request_id}/status", Logger: slog.New(slog.DiscardHandler)}
	probe, err := h.Probe()
	if err != nil || probe == nil {
		t.Fatalf("Probe: %v, %v", probe, err)
	}
	for _, tt := range []struct{ requestID, want string }{
		{"..", "/orders/%2E%2E/status"},
		{".", "/orders/%2E/status"},
		{"a/b", "/orders/a%2Fb/status"},
		{"%2e%2e", "/orders/%252e%252e/status"},
		{"../../status?x=1#f", "/orders/%2E%2E%2F%2E%2E%2Fstatus%3Fx%3D1%23f/status"},
	} {
		t.Run(tt.requestID, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			ans, err := probe(t.Context(), ProbeCall{Tool: "t", ExecutionID: "exec_1", RequestID: tt.requestID, IdempotencyKey: "carmy_k", FencingToken: 1})
			mu.Lock()
			got := append([]string(nil), seen...)
			mu.Unlock()
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("the upstream saw %q, want one request for %s", got, tt.want)
			}
			if err != nil || ans.Found {
				t.Fatalf("probe = found %v %s, %v; want not found (the upstream's 404 for the execution's own resource)", ans.Found, ans.Data, err)
			}
		})
	}
}

func TestHTTPProbeURLExpansion(t *testing.T) {
	c := ProbeCall{ExecutionID: "exec_1", RequestID: "a/b?c&d=e#f .~", IdempotencyKey: "carmy_ab", FencingToken: 9}
	for _, tt := range []struct{ tmpl, want string }{
		{"http://h/x/{request_id}?k={idempotency_key}&e={execution_id}&f={fencing_token}",
			"http://h/x/a%2Fb%3Fc%26d%3De%23f%20%2E~?k=carmy_ab&e=exec_1&f=9"},
		{"http://h/x/{request_id}?r={request_id}", "http://h/x/a%2Fb%3Fc%26d%3De%23f%20%2E~?r=a%2Fb%3Fc%26d%3De%23f+.~"},
		{"http://h/x/pre{request_id}.json", "http://h/x/prea%2Fb%3Fc%26d%3De%23f%20%2E~.json"},
		{"http://h?r={request_id}", "http://h?r=a%2Fb%3Fc%26d%3De%23f+.~"},
		{"http://h/{fencing_token}/{execution_id}", "http://h/9/exec_1"},
	} {
		p, err := parseProbeURL(tt.tmpl)
		if err != nil {
			t.Errorf("parseProbeURL(%s): %v", tt.tmpl, err)
			continue
		}
		if got := p.expand(c); got != tt.want {
			t.Errorf("%s expanded = %s, want %s", tt.tmpl, got, tt.want)
		}
	}
	if p, err := (HTTPTool{URL: "http://h/x"}).Probe(); p != nil || err != nil {
		t.Errorf("no ReconcileURL: %v, %v; want no probe", p, err)
	}
}

func TestHTTPProbeURLRefused(t *testing.T) {
	for _, tt := range []struct{ tmpl, want string }{
		{"not a url", "not an absolute http or https URL"},
		{"ftp://h/{request_id}", "not an absolute http or https URL"},
		{"/relative/{request_id}", "not an absolute http or https URL"},
		{"http://{request_id}/x", "placeholder in its scheme, userinfo, host or port"},
		{"http://h{request_id}.example/x", "placeholder in its scheme, userinfo, host or port"},
		{"http://h:{fencing_token}/x", "placeholder in its scheme, userinfo, host or port"},
		{"http://{idempotency_key}@h/x", "placeholder in its scheme, userinfo, host or port"},
		{"http://u:{execution_id}@h/x", "placeholder in its scheme, userinfo, host or port"},
		{"http://h/x#{request_id}", "placeholder in its fragment"},
	} {
		_, err := (HTTPTool{URL: "http://h/x", ReconcileURL: tt.tmpl}).Probe()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ReconcileURL %q: %v; want an error with %q", tt.tmpl, err, tt.want)
		}
	}
}

// The defence in depth: a request whose URL has not the template's shape
// is not sent, whatever made it so.
func TestHTTPProbeNotSentOffItsShape(t *testing.T) {
	srv := newFakeUpstream(t, answer(http.StatusOK, "application/json", `{"someone":"else"}`))
	// "{id}" is no placeholder: left as it is, it is not valid in a path,
	// so net/url encodes the path anew from its decoded form, in which
	// the value's %2F is a "/" again.
	h := HTTPTool{URL: srv.URL + "/orders", ReconcileURL: srv.URL + "/orders/{id}/{request_id}/status", Logger: slog.New(slog.DiscardHandler)}
	probe, err := h.Probe()
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	ans, err := probe(t.Context(), ProbeCall{Tool: "t", ExecutionID: "exec_1", RequestID: "a/b", IdempotencyKey: "k", FencingToken: 1})
	if err == nil || ans.Found || !strings.Contains(err.Error(), "another count of path segments (5) than its template (4)") {
		t.Fatalf("probe = %+v, %v; want no decided answer: another count of path segments", ans, err)
	}
	if n := len(srv.requests()); n != 0 {
		t.Fatalf("the upstream got %d requests, want none", n)
	}

	p, err := parseProbeURL("http://h:1/orders/{request_id}/status?k={idempotency_key}")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ url, want string }{
		{"http://h:1/orders/x/status?k=a/b", ""},
		{"http://h:1/orders/a%2Fb/status", ""},
		{"http://h:1/orders/a/b/status", "another count of path segments (4) than its template (3)"},
		{"http://h:1/status", "another count of path segments (1) than its template (3)"},
		{"http://h:1/orders/%2E%2E/status", ""},
		{"http://h:1/orders/../status", "dot segment"},
		{"http://h:1/orders/./status", "dot segment"},
		{"http://h:2/orders/x/status", "another scheme, userinfo or host"},
		{"https://h:1/orders/x/status", "another scheme, userinfo or host"},
		{"http://u@h:1/orders/x/status", "another scheme, userinfo or host"},
	} {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		err = p.check(u)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("check(%s) = %v; want %q", tt.url, err, tt.want)
		}
	}
}

// A probe's host given as an address is checked against the tool's egress
// policy when the probe is built, not first when it is asked.
func TestHTTPProbeURLOutsideEgress(t *testing.T) {
	allow := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tt := range []struct {
		tmpl  string
		allow []netip.Prefix
		want  string
	}{
		{"http://169.254.169.254/latest/{request_id}?t=secret", nil,
			"url http://169.254.169.254/latest/{request_id}?[redacted]: its host 169.254.169.254 is a cloud metadata address: the egress policy does not allow it"},
		{"http://[fe80::1%25lo]/x/{request_id}", nil, "is a link-local address"},
		{"http://user:pw@127.0.0.1:9/x/{request_id}", allow,
			"url http://127.0.0.1:9/x/{request_id}: its host 127.0.0.1 is outside the allowed networks: the egress policy does not allow it"},
		{"http://10.1.2.3:9/x/{request_id}", allow, ""},
		{"http://127.0.0.1:9/x/{request_id}", nil, ""},
		{"http://orders.internal/x/{request_id}", allow, ""}, // a name: checked when connecting
	} {
		_, err := (HTTPTool{URL: "http://10.0.0.1/x", ReconcileURL: tt.tmpl, AllowNetworks: tt.allow}).Probe()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("ReconcileURL %s: %v; want %q", tt.tmpl, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "pw")) {
			t.Errorf("the error repeats the url's query or userinfo: %v", err)
		}
	}
	// A Client with a Transport of its own enforces its own policy.
	h := HTTPTool{URL: "http://10.0.0.1/x", ReconcileURL: "http://127.0.0.1:9/x/{request_id}", AllowNetworks: allow,
		Client: &http.Client{Transport: http.DefaultTransport}}
	if _, err := h.Probe(); err != nil {
		t.Errorf("with the Client's own Transport: %v", err)
	}
}
