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
	header := map[string]string{}
	if body != "" {
		header["Content-Type"] = "application/json"
	}
	if token != "" {
		header["Authorization"] = "Bearer " + token
	}
	code, _, raw := DoHeaders(t, method, url, body, header)
	return code, raw
}

// DoHeaders sends a request with the given headers and returns the
// status, the answer's header and its body; a request that gets no
// answer fails t.
func DoHeaders(t testing.TB, method, url, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
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
	return resp.StatusCode, resp.Header, string(raw)
}

// Bearer is an http.RoundTripper that sends Token as a bearer token with
// every request, through Next: an MCP client's transport as a token's
// holder.
type Bearer struct {
	Token string
	Next  http.RoundTripper
}

// RoundTrip sends a copy of r with the Authorization header set.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	return b.Next.RoundTrip(r)
}

// ToolAnswer is the part of a POST /v1/tools/call answer (a record or the
// error envelope) node tests read.
type ToolAnswer struct {
	ExecutionID string `json:"execution_id"`
	Status      string `json:"status"`
	Replayed    bool   `json:"replayed"`
	Error       struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Status  int    `json:"status"`
	} `json:"error"`
}
