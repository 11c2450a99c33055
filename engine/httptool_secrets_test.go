package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
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
// holds the whole URL, and was recorded and replayed.
func TestHTTPToolUnreachableKeepsTheURLOut(t *testing.T) {
	addr := closedPort(t)
	log, logs := newLog()
	app := quietApp(t)
	url := fmt.Sprintf("http://carmy:%s@%s/orders?token=%s&x=1", secretPassword, addr, secretQuery)
	mustAddHTTPTool(t, app, "create_order", HTTPTool{URL: url, Headers: secretHeaders(), Logger: log}, 10*time.Second)

	req := Request{Tool: "create_order", RequestID: "r1"}
	resp, err := app.Call(t.Context(), Caller{Principal: "p"}, req)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if resp.Record.Status != store.StatusFailed || resp.Record.ErrorCode() != CodeUpstreamUnreachable {
		t.Fatalf("record = %s %s, want failed %s", resp.Record.Status, resp.Record.Error, CodeUpstreamUnreachable)
	}
	msg, _ := recordedError(t, resp.Record)["message"].(string)
	if want := "tool create_order: the upstream could not be reached: connection refused"; msg != want {
		t.Errorf("message = %q, want %q", msg, want)
	}
	assertNoSecret(t, "the record's error", string(resp.Record.Error), addr, "/orders", "token")

	again, err := app.Call(t.Context(), Caller{Principal: "p"}, req)
	if err != nil || !again.Replayed {
		t.Fatalf("retry = %+v, %v; want a replay", again, err)
	}
	assertNoSecret(t, "the replay's error", string(again.Record.Error), addr, "/orders")

	// The node's log has the detail, redacted, at WARN.
	out := logs.String()
	for _, want := range []string{"level=WARN", "tool=create_order", "connection refused", addr + "/orders?[redacted]", "execution_id=" + resp.Record.ExecutionID} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	assertNoSecret(t, "the log", out)
}

func TestHTTPToolUnreachableKinds(t *testing.T) {
	tests := []struct {
		name string
		url  func(t *testing.T) string
		want string
	}{
		{"refused", func(t *testing.T) string { return "http://" + closedPort(t) + "/x?token=" + secretQuery }, "connection refused"},
		{"closed without an answer", func(t *testing.T) string {
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
					c.Close()
				}
			}()
			return "http://" + ln.Addr().String() + "/x?token=" + secretQuery
		}, "the connection was closed before the answer was complete"},
		{"not TLS", func(t *testing.T) string {
			up := newFakeUpstream(t, answer(http.StatusOK, "", "{}"))
			return strings.Replace(up.URL, "http://", "https://", 1) + "/x?token=" + secretQuery
		}, "the upstream does not speak TLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := quietApp(t)
			log, logs := newLog()
			mustAddHTTPTool(t, app, "tool", HTTPTool{URL: tt.url(t), Headers: secretHeaders(), Logger: log}, 10*time.Second)
			resp, err := app.Call(t.Context(), Caller{Principal: "p"}, Request{Tool: "tool", RequestID: "r1"})
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			msg, _ := recordedError(t, resp.Record)["message"].(string)
			if resp.Record.ErrorCode() != CodeUpstreamUnreachable || !strings.HasPrefix(msg, "tool tool: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("error = %s, want %s naming the tool and %q", resp.Record.Error, CodeUpstreamUnreachable, tt.want)
			}
			assertNoSecret(t, "the record's error", string(resp.Record.Error), "token", "127.0.0.1")
			assertNoSecret(t, "the log", logs.String())
		})
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
