package engine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

// Secrets a configured HTTP tool holds in its URL and headers; none may
// reach a record, an answer or a log line.
const (
	secretQuery    = "q-SECRET-in-the-query"
	secretPassword = "pw-SECRET-in-the-userinfo"
	secretHeader   = "hdr-SECRET-in-a-header"
	secretBearer   = "bearer-SECRET-token"
)

// secretHeaders are configured headers holding secrets.
func secretHeaders() map[string]string {
	return map[string]string{"X-Api-Key": secretHeader, "Authorization": "Bearer " + secretBearer}
}

// logBuffer is a locked buffer a tool's logger writes to while the test
// reads it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newLog returns a logger writing text to a buffer it also returns.
func newLog() (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	return slog.New(slog.NewTextHandler(buf, nil)), buf
}

// assertNoSecret fails the test when text holds a configured secret or
// one of the extra strings (a URL, an address).
func assertNoSecret(t *testing.T, what, text string, extra ...string) {
	t.Helper()
	var leaks []string
	for _, s := range append([]string{secretQuery, secretPassword, secretHeader, secretBearer, "SECRET"}, extra...) {
		if s != "" && strings.Contains(text, s) {
			leaks = append(leaks, s)
		}
	}
	if leaks != nil {
		t.Errorf("%s holds %q:\n%s", what, leaks, text)
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Finding 2 of issue 14: Go's error text for an unreachable upstream
// holds the whole URL, and was recorded and replayed. A request that
// never left is no longer recorded (docs/guarantees.md), but the answer and the log
// must still keep the URL's secrets out.
func TestHTTPToolUnreachableKeepsTheURLOut(t *testing.T) {
	addr := closedPort(t)
	log, logs := newLog()
	app := quietApp(t)
	url := fmt.Sprintf("http://carmy:%s@%s/orders?token=%s&x=1", secretPassword, addr, secretQuery)
	mustAddHTTPTool(t, app, "create_order", HTTPTool{URL: url, Headers: secretHeaders(), Logger: log}, 10*time.Second)

	req := Request{Tool: "create_order", RequestID: "r1"}
	_, err := app.Call(t.Context(), Caller{Principal: "p"}, req)
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, ErrNotSent) {
		t.Fatalf("Call: %v; want UNAVAILABLE, never sent", err)
	}
	if want := "tool create_order did not run: its request was never sent (the upstream could not be reached: connection refused)"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message = %q, want it to begin %q", err, want)
	}
	assertNoSecret(t, "the answer", err.Error(), addr, "/orders", "token")

	// The node's log has the detail, redacted, at WARN.
	out := logs.String()
	for _, want := range []string{"level=WARN", "tool=create_order", "connection refused", addr + "/orders?[redacted]"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	assertNoSecret(t, "the log", out)
}

// TestHTTPToolUnreachableKinds: what the upstream saw decides what is
// recorded (docs/guarantees.md). Not one byte of the request written (refused, not
// TLS): nothing is recorded, the caller is told UNAVAILABLE, the identity
// is free. The request written but no whole answer back (closed without
// an answer, half a body): the execution is interrupted, and the call and
// its retry are uncertain. No message names the URL's secrets.
func TestHTTPToolUnreachableKinds(t *testing.T) {
	closing := func(respond func(c net.Conn)) func(t *testing.T) string {
		return func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					// Read the whole request, so that closing sends no reset.
					if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
						io.Copy(io.Discard, req.Body)
					}
					respond(c)
					c.Close()
				}
			}()
			return "http://" + ln.Addr().String() + "/x?token=" + secretQuery
		}
	}
	tests := []struct {
		name string
		url  func(t *testing.T) string
		sent bool
		want string
	}{
		{"refused", func(t *testing.T) string { return "http://" + closedPort(t) + "/x?token=" + secretQuery }, false, "connection refused"},
		{"not TLS", func(t *testing.T) string {
			up := newFakeUpstream(t, answer(http.StatusOK, "", "{}"))
			return strings.Replace(up.URL, "http://", "https://", 1) + "/x?token=" + secretQuery
		}, false, "the upstream does not speak TLS"},
		{"closed without an answer", closing(func(net.Conn) {}), true, "the connection was closed before the answer was complete"},
		{"half a body", closing(func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"order\":")
		}), true, "reading the upstream's answer failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := quietApp(t)
			log, logs := newLog()
			mustAddHTTPTool(t, app, "tool", HTTPTool{URL: tt.url(t), Headers: secretHeaders(), Logger: log}, 10*time.Second)
			req := Request{Tool: "tool", RequestID: "r1"}
			_, err := app.Call(t.Context(), Caller{Principal: "p"}, req)
			assertNoSecret(t, "the answer", fmt.Sprint(err), "token", "127.0.0.1")
			assertNoSecret(t, "the log", logs.String())
			if !strings.Contains(logs.String(), tt.want) {
				t.Errorf("the log lacks %q:\n%s", tt.want, logs.String())
			}
			rec, lerr := app.Store().Lookup(t.Context(), store.Key{Principal: "p", RequestID: "r1"})
			if !tt.sent {
				if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, ErrNotSent) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Call: %v; want UNAVAILABLE, never sent, saying %q", err, tt.want)
				}
				if !errors.Is(lerr, store.ErrNotFound) {
					t.Fatalf("after a request never sent the store holds %+v (%v); want nothing", rec, lerr)
				}
				return
			}
			var ue *store.UncertainError
			if !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted {
				t.Fatalf("Call: %v; want EXECUTION_UNCERTAIN, interrupted", err)
			}
			if lerr != nil || rec.Status != store.StatusInterrupted || rec.ExecutionID != ue.Record.ExecutionID {
				t.Fatalf("the record = %+v, %v; want %s interrupted", rec, lerr, ue.Record.ExecutionID)
			}
			_, err = app.Call(t.Context(), Caller{Principal: "p"}, req)
			if !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted {
				t.Fatalf("the retry: %v; want EXECUTION_UNCERTAIN, interrupted", err)
			}
		})
	}
}

// TestHTTPToolNeverSentRunsOnRetry: a call whose request never left frees
// its identity, so the retry with the same request_id runs the tool, once.
func TestHTTPToolNeverSentRunsOnRetry(t *testing.T) {
	var hits atomic.Int32
	up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		answer(http.StatusOK, "application/json", `{"ok":true}`)(w, r)
	})
	var refuse atomic.Bool
	refuse.Store(true)
	app := quietApp(t)
	mustAddHTTPTool(t, app, "tool", HTTPTool{URL: up.URL, control: func(string, string, syscall.RawConn) error {
		if refuse.Load() {
			return syscall.ECONNREFUSED
		}
		return nil
	}}, 10*time.Second)
	req := Request{Tool: "tool", RequestID: "r1"}
	if _, err := app.Call(t.Context(), Caller{Principal: "p"}, req); !errors.Is(err, ErrNotSent) {
		t.Fatalf("Call while the upstream refuses: %v; want never sent", err)
	}
	refuse.Store(false)
	resp, err := app.Call(t.Context(), Caller{Principal: "p"}, req)
	if err != nil || resp.Replayed || resp.Record.Status != store.StatusCompleted {
		t.Fatalf("the retry = %+v, %v; want a fresh completed run", resp, err)
	}
	again, err := app.Call(t.Context(), Caller{Principal: "p"}, req)
	if err != nil || !again.Replayed || again.Record.ExecutionID != resp.Record.ExecutionID {
		t.Fatalf("the next retry = %+v, %v; want the replay of %s", again, err, resp.Record.ExecutionID)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the upstream was called %d times, want 1", n)
	}
}

// An upstream that echoes its request in a failed answer (a 404 page
// naming the URL, a debugging endpoint) must not carry the configured
// secrets into the record.
func TestHTTPToolRedactsEchoedSecrets(t *testing.T) {
	up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "bad request %s\nkey %s\nauth %s\nuser %v\n", r.URL.RequestURI(), r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), r.URL.User)
	})
	app := quietApp(t)
	url := strings.Replace(up.URL, "http://", "http://carmy:"+secretPassword+"@", 1) + "/orders?token=" + secretQuery
	mustAddHTTPTool(t, app, "tool", HTTPTool{URL: url, Headers: secretHeaders()}, 0)
	resp, err := app.Call(t.Context(), Caller{Principal: "p"}, Request{Tool: "tool", RequestID: "r1"})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	e := recordedError(t, resp.Record)
	body, _ := e["body"].(string)
	if e["code"] != CodeUpstreamStatus || e["status"] != float64(http.StatusBadRequest) || !strings.Contains(body, "bad request /orders?[redacted]") {
		t.Errorf("error = %s, want UPSTREAM_STATUS 400 with the echo, redacted", resp.Record.Error)
	}
	assertNoSecret(t, "the record's error", string(resp.Record.Error))
}

func TestHTTPToolFuncErrorsKeepTheURLOut(t *testing.T) {
	for _, h := range []HTTPTool{
		{URL: "ftp://carmy:" + secretPassword + "@127.0.0.1/x?token=" + secretQuery},
		{URL: "127.0.0.1:9/x?token=" + secretQuery},
		{URL: "http://carmy:" + secretPassword + "@127.0.0.1:port/x?token=" + secretQuery},
		{URL: "http://127.0.0.1/x?token=" + secretQuery, Method: "NOT A METHOD"},
	} {
		_, err := h.Func()
		if err == nil {
			t.Errorf("HTTPTool{URL: %q, Method: %q}.Func() accepted it", h.URL, h.Method)
			continue
		}
		assertNoSecret(t, "Func's error", err.Error())
	}
}

// TestHTTPToolCutOnKeptAliveConnectionSentOnce: an upstream that reads a
// call on a kept-alive connection and closes it without answering saw
// the call once — net/http would send a request carrying an
// Idempotency-Key again by itself — and the execution is interrupted.
func TestHTTPToolCutOnKeptAliveConnectionSentOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		id := r.Header.Get("Carmy-Request-Id")
		mu.Lock()
		seen[id]++
		mu.Unlock()
		if id == "warm" {
			answer(http.StatusOK, "application/json", `{"ok":true}`)(w, r)
			return
		}
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	})
	app := quietApp(t)
	mustAddHTTPTool(t, app, "tool", HTTPTool{URL: up.URL}, 10*time.Second)
	if _, err := app.Call(t.Context(), Caller{Principal: "p"}, Request{Tool: "tool", RequestID: "warm"}); err != nil {
		t.Fatalf("the first call, which leaves a kept-alive connection: %v", err)
	}
	_, err := app.Call(t.Context(), Caller{Principal: "p"}, Request{Tool: "tool", RequestID: "cut"})
	var ue *store.UncertainError
	if !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted {
		t.Fatalf("Call = %v; want EXECUTION_UNCERTAIN, interrupted", err)
	}
	mu.Lock()
	n := seen["cut"]
	mu.Unlock()
	if n != 1 {
		t.Fatalf("the upstream received the call %d times, want 1", n)
	}
}
