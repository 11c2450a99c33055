package engine

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/store"
)

// newOtherHostUpstream starts a fake upstream on another loopback host
// than httptest's 127.0.0.1: 127.0.0.2, or [::1] where that cannot be
// bound.
func newOtherHostUpstream(t *testing.T, h http.HandlerFunc) *fakeUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		if ln, err = net.Listen("tcp", "[::1]:0"); err != nil {
			t.Skipf("no second loopback host to listen on: %v", err)
		}
	}
	return startFakeUpstream(t, ln, h)
}

// redirectTo returns a handler answering status with Location: to.
func redirectTo(status int, to string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", to)
		w.WriteHeader(status)
		fmt.Fprintf(w, "see %s", to)
	}
}

// callTool makes one call with a request_id of tool on app and returns
// the record.
func callTool(t *testing.T, app *Runtime, tool string, args string) store.Record {
	t.Helper()
	resp, err := app.Call(t.Context(), Caller{Principal: "p"}, Request{Tool: tool, RequestID: "r1", Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	return resp.Record
}

// Finding 3 of issue 14: a redirect to another host was followed with
// the body and every configured header but Authorization, and the other
// host's answer came back as data.
func TestHTTPToolDoesNotFollowRedirectsToAnotherHost(t *testing.T) {
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		for _, follow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d follow=%v", status, follow), func(t *testing.T) {
				other := newOtherHostUpstream(t, answer(http.StatusOK, "application/json", `{"foreign":true}`))
				up := newFakeUpstream(t, redirectTo(status, other.URL+"/steal?token="+secretQuery))
				log, logs := newLog()
				app := quietApp(t)
				mustAddHTTPTool(t, app, "tool", HTTPTool{
					URL: up.URL + "/orders?token=" + secretQuery, Headers: secretHeaders(), FollowRedirects: follow, Logger: log,
				}, 0)
				rec := callTool(t, app, "tool", `{"sku":"KB-01"}`)
				e := recordedError(t, rec)
				if rec.Status != store.StatusFailed || e["code"] != CodeUpstreamStatus || e["status"] != float64(status) {
					t.Fatalf("record = %s %s (data %s), want failed %s with status %d", rec.Status, rec.Error, rec.Data, CodeUpstreamStatus, status)
				}
				if msg, _ := e["message"].(string); !strings.Contains(msg, "tool tool: ") || !strings.Contains(msg, "not followed: it leads to another host") {
					t.Errorf("message = %q, want it to name the tool and the redirect not followed", msg)
				}
				if n := len(other.requests()); n != 0 {
					t.Errorf("the other host got %d requests, want none", n)
				}
				if n := len(up.requests()); n != 1 {
					t.Errorf("the upstream got %d requests, want 1", n)
				}
				// The body is the upstream's (it names the other host); the
				// configured URL and secrets appear nowhere.
				assertNoSecret(t, "the record's error", string(rec.Error), up.URL)
				assertNoSecret(t, "the log", logs.String())
				if !strings.Contains(logs.String(), "level=WARN") {
					t.Errorf("the redirect not followed is not logged at WARN:\n%s", logs)
				}
			})
		}
	}
}

func TestHTTPToolDoesNotFollowRedirectsByDefault(t *testing.T) {
	var up *fakeUpstream
	up = newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			answer(http.StatusOK, "application/json", `{"moved":true}`)(w, r)
			return
		}
		redirectTo(http.StatusMovedPermanently, up.URL+"/moved")(w, r)
	})
	app := quietApp(t)
	mustAddHTTPTool(t, app, "tool", HTTPTool{URL: up.URL + "/orders"}, 0)
	rec := callTool(t, app, "tool", `{}`)
	e := recordedError(t, rec)
	if e["code"] != CodeUpstreamStatus || e["status"] != float64(http.StatusMovedPermanently) {
		t.Fatalf("record = %s %s, want failed %s 301", rec.Status, rec.Error, CodeUpstreamStatus)
	}
	if msg, _ := e["message"].(string); !strings.Contains(msg, "the tool does not follow redirects") {
		t.Errorf("message = %q, want it to say the tool does not follow redirects", msg)
	}
	if reqs := up.requests(); len(reqs) != 1 || reqs[0].Path != "/orders" {
		t.Errorf("the upstream got %+v, want one request to /orders", reqs)
	}
}

func TestHTTPToolFollowsSameHostRedirectsWithoutConfiguredHeaders(t *testing.T) {
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/moved" {
					answer(http.StatusOK, "application/json", `{"moved":true}`)(w, r)
					return
				}
				redirectTo(status, "/moved")(w, r)
			})
			app := quietApp(t)
			url := strings.Replace(up.URL, "http://", "http://carmy:"+secretPassword+"@", 1) + "/orders?token=" + secretQuery
			mustAddHTTPTool(t, app, "tool", HTTPTool{URL: url, Headers: secretHeaders(), FollowRedirects: true}, 0)
			rec := callTool(t, app, "tool", `{"sku":"KB-01"}`)
			if rec.Status != store.StatusCompleted || string(rec.Data) != `{"moved":true}` {
				t.Fatalf("record = %s %s %s, want completed with the answer of /moved", rec.Status, rec.Data, rec.Error)
			}
			reqs := up.requests()
			if len(reqs) != 2 || reqs[0].Path != "/orders" || reqs[1].Path != "/moved" {
				t.Fatalf("the upstream got %+v, want /orders then /moved", reqs)
			}
			first, second := reqs[0].Header, reqs[1].Header
			if first.Get("X-Api-Key") != secretHeader || first.Get("Authorization") != "Bearer "+secretBearer {
				t.Errorf("the first request lacks the configured headers: %v", first)
			}
			for _, k := range []string{"X-Api-Key", "Authorization", "Referer"} {
				if v, ok := second[k]; ok {
					t.Errorf("the redirected request carries %s: %q", k, v)
				}
			}
			for _, k := range []string{"Idempotency-Key", "Carmy-Execution-Id", "Carmy-Request-Id", "Carmy-Fencing-Token", "Accept"} {
				if v := second.Get(k); v == "" || v != first.Get(k) {
					t.Errorf("the redirected request has %s = %q, want Carmy's %q", k, v, first.Get(k))
				}
			}
			if status == http.StatusTemporaryRedirect {
				if reqs[1].Method != http.MethodPost || string(reqs[1].Body) != `{"sku":"KB-01"}` {
					t.Errorf("a 307 sent %s %q, want the same POST and body", reqs[1].Method, reqs[1].Body)
				}
			} else if reqs[1].Method != http.MethodGet || len(reqs[1].Body) != 0 || second.Get("Content-Type") != "" {
				t.Errorf("a 302 sent %s %q (Content-Type %q), want a GET without a body", reqs[1].Method, reqs[1].Body, second.Get("Content-Type"))
			}
		})
	}
}

func TestHTTPToolRedirectLimit(t *testing.T) {
	up := newFakeUpstream(t, redirectTo(http.StatusFound, "/again"))
	app := quietApp(t)
	mustAddHTTPTool(t, app, "tool", HTTPTool{URL: up.URL, FollowRedirects: true}, 0)
	rec := callTool(t, app, "tool", `{}`)
	if e := recordedError(t, rec); e["code"] != CodeUpstreamStatus || e["status"] != float64(http.StatusFound) {
		t.Fatalf("record = %s %s, want failed %s 302", rec.Status, rec.Error, CodeUpstreamStatus)
	}
	if n := len(up.requests()); n != maxRedirects+1 {
		t.Errorf("the upstream got %d requests, want %d", n, maxRedirects+1)
	}
}

func TestHTTPToolNeverRedirectsFromHTTPSToHTTP(t *testing.T) {
	plain := newFakeUpstream(t, answer(http.StatusOK, "application/json", `{"plain":true}`))
	tlsUp := httptest.NewTLSServer(redirectTo(http.StatusFound, plain.URL+"/x"))
	t.Cleanup(tlsUp.Close)
	app := quietApp(t)
	// The test's Client trusts the server's certificate; its CheckRedirect,
	// which would follow anything, is replaced by the tool's rule.
	client := tlsUp.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return nil }
	mustAddHTTPTool(t, app, "tool", HTTPTool{URL: tlsUp.URL, FollowRedirects: true, Client: client}, 0)
	rec := callTool(t, app, "tool", `{}`)
	if e := recordedError(t, rec); e["code"] != CodeUpstreamStatus || e["status"] != float64(http.StatusFound) {
		t.Fatalf("record = %s %s, want failed %s 302", rec.Status, rec.Error, CodeUpstreamStatus)
	}
	if n := len(plain.requests()); n != 0 {
		t.Errorf("the plain-HTTP upstream got %d requests, want none", n)
	}
}

func TestSameOrigin(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"http://h/x", "http://h/y?z", true},
		{"http://h/x", "http://H:80/x", true},
		{"https://h/x", "https://h:443/x", true},
		{"http://[::1]:8080/", "http://[::1]:8080/a", true},
		{"http://h/x", "http://h:8080/x", false},
		{"https://h/x", "http://h:443/x", false},
		{"http://h/x", "https://h/x", false},
		{"http://h/x", "http://g/x", false},
		{"http://h/x", "http://h.evil/x", false},
		{"http://127.0.0.1/x", "http://127.0.0.2/x", false},
	}
	for _, tt := range tests {
		a, _ := url.Parse(tt.a)
		b, _ := url.Parse(tt.b)
		if got := sameOrigin(a, b); got != tt.want {
			t.Errorf("sameOrigin(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
