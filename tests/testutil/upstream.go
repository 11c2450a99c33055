package testutil

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// Upstream is a loopback HTTP server, standing in for a tool's upstream,
// that counts the requests it got.
type Upstream struct {
	*httptest.Server
	// Requests is how many requests reached the server.
	Requests atomic.Int64
}

// StartUpstream serves h on ln (nil: a port of 127.0.0.1) until the test
// ends.
func StartUpstream(t testing.TB, ln net.Listener, h http.HandlerFunc) *Upstream {
	t.Helper()
	u := &Upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.Requests.Add(1)
		h(w, r)
	}))
	if ln != nil {
		u.Listener.Close()
		u.Listener = ln
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// Do sends a request to a node's API, with a JSON body unless body is ""
// and as a bearer token's holder unless token is "", and returns the
// status and the raw answer; a request that gets no answer fails t.
func Do(t testing.TB, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, string(raw)
}
