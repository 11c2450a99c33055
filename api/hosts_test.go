package api_test

// Tests of the Host allow-list and the cross-origin check (hosts.go),
// the trusted proxies of the failed-authentication lockout
// (clientaddr.go) and the base URL of the /mcp metadata (publicurl.go),
// over a real runtime served on loopback.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/tests/testutil"
)

// hostReq sends method path to the node at addr, naming host in the Host
// header, with the headers of hdr, and returns the status, the answer's
// header and its decoded JSON (nil when it is not JSON).
func hostReq(t *testing.T, addr, method, path, host, body string, hdr map[string]string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, resp.Header, out
}

// peerStub stands for the node-to-node endpoints.
var peerStub = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

func serveHosts(t *testing.T, cfg api.Config) string {
	t.Helper()
	app := carmy.App(carmy.WithLogger(quietLogger()), carmy.WithDrainTimeout(time.Second))
	if err := app.AddDemoTools(); err != nil {
		t.Fatal(err)
	}
	cfg.Logger = quietLogger()
	cfg.Peer = peerStub
	return testutil.Serve(t, app, cfg)
}

// mcpHeaders are those of a well-formed /mcp request.
var mcpHeaders = map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"}

// routesOfEveryKind are a request to each kind of route: the API, the
// console, /mcp, its metadata, operations.
var routesOfEveryKind = []struct {
	method, path, body string
	hdr                map[string]string
}{
	{"GET", "/v1/tools", "", nil},
	{"POST", "/v1/tools/call", `{"tool":"echo"}`, map[string]string{"Content-Type": "application/json"}},
	{"POST", "/v1/cluster/nodes", `{"id":"ghost","raft_addr":"10.9.9.9:8300"}`, map[string]string{"Content-Type": "application/json"}},
	{"GET", "/v1/executions", "", nil},
	{"GET", "/ui/", "", nil},
	{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, mcpHeaders},
	{"GET", "/.well-known/oauth-protected-resource", "", nil},
	{"GET", "/metrics", "", nil},
	{"GET", "/healthz", "", nil},
	{"GET", "/readyz", "", nil},
	{"GET", "/openapi.json", "", nil},
}

// TestHostAllowList checks, with auth off, that a request naming a Host
// that is not the node's is answered 421 with the FORBIDDEN envelope on
// every route (the DNS rebinding of issue 28: a page added a voter with
// Host: attacker.example), and that IP literals, localhost, the node's
// own names and --allowed-hosts are served, as is /internal/ whatever its
// Host.
func TestHostAllowList(t *testing.T) {
	addr := serveHosts(t, api.Config{OwnHosts: []string{"carmy-1.lan:8080"}, AllowedHosts: []string{"api.example.com", "*.corp.example"}})
	_, port, _ := strings.Cut(addr, ":")
	for _, rt := range routesOfEveryKind {
		for _, host := range []string{"attacker.example", "attacker.example:" + port, "localhost.attacker.example", "corp.example", "127.0.0.1.nip.io"} {
			status, _, body := hostReq(t, addr, rt.method, rt.path, host, rt.body, rt.hdr)
			e, _ := body["error"].(map[string]any)
			if status != http.StatusMisdirectedRequest || e["code"] != "FORBIDDEN" || e["host"] == nil {
				t.Errorf("%s %s with Host %s: %d %v, want 421 FORBIDDEN", rt.method, rt.path, host, status, body)
			}
		}
	}
	for _, host := range []string{"", "127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "app.localhost:" + port, "[::1]:" + port,
		"10.1.2.3", "[2001:db8::1]:80", "carmy-1.lan", "Carmy-1.LAN.:8080", "api.example.com", "a.b.corp.example:" + port} {
		if status, _, body := hostReq(t, addr, "GET", "/v1/tools", host, "", nil); status != http.StatusOK {
			t.Errorf("GET /v1/tools with Host %q: %d %v, want 200", host, status, body)
		}
	}
	if status, _, body := hostReq(t, addr, "POST", "/internal/v1/state", "attacker.example", "", nil); status != http.StatusNoContent {
		t.Errorf("/internal/ with a foreign Host: %d %v, want the peer handler's 204", status, body)
	}
}

// TestHostCheckWithAuthOn checks that with auth on the check is off
// unless --allowed-hosts is given, and that "*" turns it off with auth
// off.
func TestHostCheckWithAuthOn(t *testing.T) {
	open := serveHosts(t, api.Config{Auth: oasAuth()})
	if status, _, body := hostReq(t, open, "GET", "/v1/tools", "carmy.default.svc", "", map[string]string{"Authorization": "Bearer " + oasPlanner}); status != http.StatusOK {
		t.Errorf("auth on, no --allowed-hosts: %d %v, want 200", status, body)
	}
	listed := serveHosts(t, api.Config{Auth: oasAuth(), AllowedHosts: []string{"carmy.default.svc"}})
	if status, _, body := hostReq(t, listed, "GET", "/v1/tools", "carmy.default.svc", "", map[string]string{"Authorization": "Bearer " + oasPlanner}); status != http.StatusOK {
		t.Errorf("auth on, an allowed host: %d %v, want 200", status, body)
	}
	if status, _, body := hostReq(t, listed, "GET", "/healthz", "attacker.example", "", nil); status != http.StatusMisdirectedRequest {
		t.Errorf("auth on with --allowed-hosts, a foreign Host: %d %v, want 421", status, body)
	}
	star := serveHosts(t, api.Config{AllowedHosts: []string{"*"}})
	if status, _, body := hostReq(t, star, "GET", "/v1/tools", "anything.example", "", nil); status != http.StatusOK {
		t.Errorf("--allowed-hosts '*': %d %v, want 200", status, body)
	}
	if _, err := api.New(carmy.App(carmy.WithLogger(quietLogger())).Engine(), api.Config{AllowedHosts: []string{"https://x.example"}}); err == nil {
		t.Error("an allowed host with a scheme is accepted")
	}
}

// TestCrossOriginRefused checks that with auth off a browser page of
// another origin cannot change state, even by an IP literal Host that the
// allow-list serves: a POST without Content-Type needs no preflight and
// its body is read as JSON. Reads, same-origin requests and non-browser
// clients are served; with auth on the check is off (a page cannot attach
// the token).
func TestCrossOriginRefused(t *testing.T) {
	addr := serveHosts(t, api.Config{})
	call := `{"tool":"echo","arguments":{"a":1}}`
	for name, hdr := range map[string]map[string]string{
		"Origin":                   {"Origin": "http://evil.example"},
		"Origin of another port":   {"Origin": "http://127.0.0.1:1"},
		"Sec-Fetch-Site":           {"Sec-Fetch-Site": "cross-site"},
		"Origin null (a sandbox)":  {"Origin": "null"},
		"Origin on /mcp":           {"Origin": "http://evil.example"},
		"Sec-Fetch-Site same-site": {"Sec-Fetch-Site": "same-site", "Origin": "http://sub.127.0.0.1"},
	} {
		path, body := "/v1/tools/call", call
		if name == "Origin on /mcp" {
			path, body = "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
			for k, v := range mcpHeaders {
				hdr[k] = v
			}
		}
		status, _, ans := hostReq(t, addr, "POST", path, "", body, hdr)
		e, _ := ans["error"].(map[string]any)
		if status != http.StatusForbidden || e["code"] != "FORBIDDEN" {
			t.Errorf("%s: %d %v, want 403 FORBIDDEN", name, status, ans)
		}
	}
	for name, hdr := range map[string]map[string]string{
		"no Origin":   nil,
		"same origin": {"Origin": "http://" + addr},
		"same-origin": {"Sec-Fetch-Site": "same-origin", "Origin": "http://" + addr},
		"user typed":  {"Sec-Fetch-Site": "none"},
	} {
		if status, _, ans := hostReq(t, addr, "POST", "/v1/tools/call", "", call, hdr); status != http.StatusOK {
			t.Errorf("%s: %d %v, want 200", name, status, ans)
		}
	}
	if status, _, ans := hostReq(t, addr, "GET", "/v1/tools", "", "", map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}); status != http.StatusOK {
		t.Errorf("a cross-origin GET: %d %v, want 200 (reads change nothing; CORS keeps the answer from the page)", status, ans)
	}
	authed := serveHosts(t, api.Config{Auth: oasAuth()})
	if status, _, ans := hostReq(t, authed, "POST", "/v1/tools/call", "", call, map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + oasPlanner}); status != http.StatusOK {
		t.Errorf("auth on, a cross-origin POST with a token: %d %v, want 200", status, ans)
	}
}

// TestMetadataNamesTheNodeNotTheHost checks that the /mcp metadata
// document and the resource_metadata of a 401 name the listener's
// address, or the public URL, never the request's Host.
func TestMetadataNamesTheNodeNotTheHost(t *testing.T) {
	addr := serveHosts(t, api.Config{Auth: oasAuth()})
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		status, _, doc := hostReq(t, addr, "GET", path, "attacker.example", "", nil)
		if status != http.StatusOK || doc["resource"] != "http://"+addr+"/mcp" {
			t.Errorf("GET %s with Host attacker.example: %d resource %v, want http://%s/mcp", path, status, doc["resource"], addr)
		}
	}
	status, h, _ := hostReq(t, addr, "POST", "/mcp", "attacker.example", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, mcpHeaders)
	want := `resource_metadata="http://` + addr + `/.well-known/oauth-protected-resource"`
	if got := h.Get("WWW-Authenticate"); status != http.StatusUnauthorized || !strings.Contains(got, want) || strings.Contains(got, "attacker") {
		t.Errorf("401 with Host attacker.example: %d WWW-Authenticate %q, want %s", status, got, want)
	}

	pub := serveHosts(t, api.Config{Auth: oasAuth(), PublicURL: "https://carmy.example.com/"})
	if _, _, doc := hostReq(t, pub, "GET", "/.well-known/oauth-protected-resource", "attacker.example", "", nil); doc["resource"] != "https://carmy.example.com/mcp" {
		t.Errorf("with a public URL: resource %v", doc["resource"])
	}
	if _, h, _ := hostReq(t, pub, "POST", "/mcp", "attacker.example", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, mcpHeaders); !strings.Contains(h.Get("WWW-Authenticate"), `resource_metadata="https://carmy.example.com/.well-known/oauth-protected-resource"`) {
		t.Errorf("with a public URL: WWW-Authenticate %q", h.Get("WWW-Authenticate"))
	}
	for _, bad := range []string{"carmy.example.com", "ftp://x", "https://x/path", "https://x/?q=1", "https://"} {
		if err := api.ValidatePublicURL(bad); err == nil {
			t.Errorf("ValidatePublicURL(%q) = nil", bad)
		}
	}
}

// TestTrustedProxies checks that behind a trusted proxy the lockout keys
// on the client X-Forwarded-For names (its rightmost untrusted entry), so
// one client guessing tokens does not lock the others out; and that
// without trusted proxies X-Forwarded-For is not believed.
func TestTrustedProxies(t *testing.T) {
	trusted, err := api.ParseTrustedProxies("127.0.0.0/8, ::1")
	if err != nil {
		t.Fatal(err)
	}
	guess := func(addr, xff, token string) (int, map[string]any) {
		status, _, body := hostReq(t, addr, "GET", "/v1/tools", "", "", map[string]string{"X-Forwarded-For": xff, "Authorization": "Bearer " + token})
		return status, body
	}
	behind := serveHosts(t, api.Config{Auth: oasAuth(), AuthFailures: api.AuthFailures{PerMinute: 2}, TrustedProxies: trusted})
	for range 2 {
		if status, body := guess(behind, "203.0.113.7", "wrong-token"); status != http.StatusUnauthorized {
			t.Fatalf("a wrong token: %d %v", status, body)
		}
	}
	// The client cannot escape by writing addresses of its own at the left
	// (a wrong token is refused unread); a correct token is served all the
	// same, so a stale token in one tab locks no agent out.
	for _, xff := range []string{"203.0.113.7", "198.51.100.1, 203.0.113.7", "203.0.113.7, 127.0.0.2"} {
		status, body := guess(behind, xff, "another-wrong-token")
		if e, _ := body["error"].(map[string]any); status != http.StatusTooManyRequests || e["source"] != "203.0.113.7" {
			t.Errorf("X-Forwarded-For %q after the guesses: %d %v, want 429 with source 203.0.113.7", xff, status, body)
		}
		if status, body := guess(behind, xff, oasPlanner); status != http.StatusOK {
			t.Errorf("X-Forwarded-For %q after the guesses, a correct token: %d %v, want 200", xff, status, body)
		}
	}
	if status, body := guess(behind, "203.0.113.8", oasPlanner); status != http.StatusOK {
		t.Errorf("another client behind the proxy: %d %v, want 200", status, body)
	}

	direct := serveHosts(t, api.Config{Auth: oasAuth(), AuthFailures: api.AuthFailures{PerMinute: 2}})
	for range 2 {
		guess(direct, "203.0.113.7", "wrong-token")
	}
	status, body := guess(direct, "203.0.113.8", "another-wrong-token")
	if e, _ := body["error"].(map[string]any); status != http.StatusTooManyRequests || e["source"] != "127.0.0.1" {
		t.Errorf("no trusted proxy, another X-Forwarded-For: %d %v, want 429 for 127.0.0.1", status, body)
	}
	if _, err := api.ParseTrustedProxies("10.0.0.0/8,nonsense"); err == nil {
		t.Error("ParseTrustedProxies accepts nonsense")
	}
	if p, _ := api.ParseTrustedProxies("10.1.2.3"); len(p) != 1 || p[0] != netip.MustParsePrefix("10.1.2.3/32") {
		t.Errorf("ParseTrustedProxies(10.1.2.3) = %v", p)
	}
}
