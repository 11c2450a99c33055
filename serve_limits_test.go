package carmy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/tests/testutil"
)

// closedWithin reads from conn until the server closes it, failing the
// test if that takes longer than d; it returns what was read.
func closedWithin(t *testing.T, conn net.Conn, d time.Duration) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(d))
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s; read %q", d, got)
	}
	return string(got)
}

func TestSlowHeadersAreCutOff(t *testing.T) {
	app := newApp(t)
	addr := testutil.Serve(t, app, api.Config{Timeouts: api.Timeouts{ReadHeader: 200 * time.Millisecond}})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Half a request, then nothing: a slowloris client.
	if _, err := io.WriteString(conn, "POST /v1/tools/call HTTP/1.1\r\nHost: localhost\r\n"); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, conn, 10*time.Second)
}

func TestSlowBodyIsCutOffButNotALongCall(t *testing.T) {
	app := newApp(t)
	mustAdd(t, app, carmy.ToolSpec{Name: "slow", Func: func(ctx context.Context, call carmy.Call) (any, error) {
		select {
		case <-time.After(500 * time.Millisecond):
			return "done", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})
	addr := testutil.Serve(t, app, api.Config{Timeouts: api.Timeouts{Body: 200 * time.Millisecond}})

	// A body that never arrives in full is refused.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/tools/call HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"tool\":"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a body that stalled: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "INVALID_REQUEST") {
		t.Errorf("stalled body: %d %s, want 400 INVALID_REQUEST", resp.StatusCode, body)
	}

	// A call whose tool runs longer than the body timeout is answered.
	resp, err = http.Post("http://"+addr+"/v1/tools/call", "application/json",
		strings.NewReader(`{"tool":"slow","request_id":"long-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"completed"`) {
		t.Errorf("a call longer than the body timeout: %d %s, want 200 completed", resp.StatusCode, body)
	}
}

// TestAnswerNotReadIsCutOff checks the write timeout: a client that stops
// reading a large answer is cut off (the handler returns and logs its
// call), while the tool's run before the answer, longer than the timeout,
// is not counted against it.
func TestAnswerNotReadIsCutOff(t *testing.T) {
	const size = 32 << 20 // more than loopback's socket buffers hold
	app := newApp(t, carmy.WithMaxResultBytes(size+1024))
	mustAdd(t, app, carmy.ToolSpec{Name: "big", Func: func(ctx context.Context, call carmy.Call) (any, error) {
		select {
		case <-time.After(600 * time.Millisecond): // longer than the write timeout
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return strings.Repeat("x", size), nil
	}})
	logs := &testutil.SyncBuffer{}
	addr := testutil.Serve(t, app, api.Config{
		Timeouts: api.Timeouts{Write: 300 * time.Millisecond},
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
	})
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"tool":"big","request_id":"b1"}`
	if _, err := fmt.Fprintf(conn, "POST /v1/tools/call HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing; the server must give up on the answer.
	// The deadline is generous: under -race on a loaded machine, encoding
	// and recording 32 MiB alone takes seconds.
	testutil.Until(t, 60*time.Second, "the call's handler to give up writing", func() bool {
		return strings.Contains(logs.String(), "msg=call") && strings.Contains(logs.String(), "request_id=b1")
	})
	if !strings.Contains(logs.String(), "outcome=ran") {
		t.Fatalf("the tool did not run to its answer (the wait was cut?):\n%s", logs.String())
	}
	got := closedWithin(t, conn, 60*time.Second)
	if len(got) >= size {
		t.Fatalf("read %d bytes: the whole answer was written", len(got))
	}
	if !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Fatalf("the answer did not start as a 200: %.60q", got)
	}
}
