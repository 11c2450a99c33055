package egress_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/carmyhq/carmy/internal/egress"
)

// arrivals counts the requests an upstream received per Idempotency-Key.
type arrivals struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *arrivals) add(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	a.n[key]++
	return a.n[key]
}

func (a *arrivals) get(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[key]
}

// cutUpstream answers a request whose body is "answer", and reads any
// other whole and then closes its connection without answering: an
// upstream that did the work and lost the connection.
func cutUpstream(t *testing.T, seen *arrivals) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen.add(r.Header.Get("Idempotency-Key"))
		if string(body) == "answer" {
			w.Write([]byte("ok"))
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// post sends body under key through client, guarded or not, and returns
// the request's error and whether it was sent.
func post(t *testing.T, client *http.Client, url, key, body string, guard bool) (error, bool) {
	t.Helper()
	ctx, send := egress.TrackSend(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", key)
	if guard {
		send.GuardResend(req)
	}
	resp, err := client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return err, send.Sent()
}

// TestGuardResend: a request carrying an Idempotency-Key, written on a
// kept-alive connection that the upstream closes without answering, is
// sent again by net/http's Transport on its own — the upstream sees it
// twice — unless GuardResend holds it back; then it is seen once, and the
// error says it was not sent again.
func TestGuardResend(t *testing.T) {
	for _, guard := range []bool{false, true} {
		name := map[bool]string{false: "unguarded", true: "guarded"}[guard]
		t.Run(name, func(t *testing.T) {
			seen := &arrivals{}
			url := cutUpstream(t, seen)
			client := &http.Client{Transport: policyTransport(t)}
			// A first request leaves a kept-alive connection behind.
			if err, _ := post(t, client, url, "warm", "answer", guard); err != nil {
				t.Fatalf("first request: %v", err)
			}
			err, sent := post(t, client, url, "cut", "work", guard)
			if err == nil {
				t.Fatal("a request whose connection was cut got an answer")
			}
			if !sent {
				t.Error("Sent() = false for a request the upstream read")
			}
			got := seen.get("cut")
			switch {
			case guard && got != 1:
				t.Errorf("guarded: the upstream received the request %d times, want 1", got)
			case guard && !errors.Is(err, egress.ErrNoResend):
				t.Errorf("guarded: error %v, want ErrNoResend", err)
			case !guard && got != 2:
				// What the guard is for: if net/http stopped re-sending,
				// this documents it.
				t.Errorf("unguarded: the upstream received the request %d times, want 2 (net/http's re-send)", got)
			}
		})
	}
}

// TestGuardResendKeepsRedirects: a guarded request still follows a
// redirect that must re-send its body (307), since an answer came first.
func TestGuardResendKeepsRedirects(t *testing.T) {
	seen := &arrivals{}
	mux := http.NewServeMux()
	mux.HandleFunc("/from", func(w http.ResponseWriter, r *http.Request) {
		seen.add("from")
		http.Redirect(w, r, "/to", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen.add("to:" + string(body))
		w.Write([]byte("ok"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: policyTransport(t)}
	if err, _ := post(t, client, srv.URL+"/from", "k", "work", true); err != nil {
		t.Fatalf("redirected request: %v", err)
	}
	if from, to := seen.get("from"), seen.get("to:work"); from != 1 || to != 1 {
		t.Errorf("%d arrivals at /from and %d at /to with the body, want 1 and 1", from, to)
	}
}
