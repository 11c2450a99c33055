package engine_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// sentCounter is a Request.OnSent that counts its calls and closes first
// at the first.
type sentCounter struct {
	n     atomic.Int64
	first chan struct{}
}

func newSentCounter() *sentCounter { return &sentCounter{first: make(chan struct{})} }

func (s *sentCounter) onSent() {
	if s.n.Add(1) == 1 {
		close(s.first)
	}
}

// TestOnSent: Request.OnSent is called once, when the tool's request
// starts to leave: a Go tool as it is invoked; a tool that marks it
// (ToolSpec.MarksSent) when it calls MarkSent, or when it returns with
// anything but ErrNotSent; never for a request never sent.
func TestOnSent(t *testing.T) {
	app := newApp(t)
	var sentAtStart atomic.Bool
	var goSent *sentCounter
	mustAdd(t, app, engine.ToolSpec{Name: "go", Func: func(context.Context, engine.Call) (any, error) {
		sentAtStart.Store(goSent.n.Load() == 1)
		return "ok", nil
	}})
	release := make(chan struct{})
	mustAdd(t, app, engine.ToolSpec{Name: "marks", MarksSent: true, Func: func(ctx context.Context, _ engine.Call) (any, error) {
		engine.MarkSent(ctx)
		engine.MarkSent(ctx)
		<-release
		return "ok", nil
	}})
	mustAdd(t, app, engine.ToolSpec{Name: "fails", MarksSent: true, Func: func(context.Context, engine.Call) (any, error) {
		return nil, errors.New("no")
	}})
	mustAdd(t, app, engine.ToolSpec{Name: "never", MarksSent: true, Func: func(context.Context, engine.Call) (any, error) {
		return nil, &engine.NotSentError{Reason: "refused"}
	}})

	goSent = newSentCounter()
	if _, err := app.Call(t.Context(), alice, engine.Request{Tool: "go", RequestID: "go", OnSent: goSent.onSent}); err != nil {
		t.Fatal(err)
	}
	if goSent.n.Load() != 1 || !sentAtStart.Load() {
		t.Errorf("a Go tool: OnSent called %d times, before the tool %v; want once, before", goSent.n.Load(), sentAtStart.Load())
	}

	marks := newSentCounter()
	done := make(chan error, 1)
	go func() {
		_, err := app.Call(context.Background(), alice, engine.Request{Tool: "marks", RequestID: "marks", OnSent: marks.onSent})
		done <- err
	}()
	select {
	case <-marks.first:
	case <-time.After(30 * time.Second):
		t.Fatal("MarkSent did not reach OnSent while the tool ran")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := marks.n.Load(); n != 1 {
		t.Errorf("a tool that marks twice: OnSent called %d times, want once", n)
	}

	fails := newSentCounter()
	if _, err := app.Call(t.Context(), alice, engine.Request{Tool: "fails", RequestID: "fails", OnSent: fails.onSent}); err != nil {
		t.Fatal(err)
	}
	if n := fails.n.Load(); n != 1 {
		t.Errorf("a marking tool that failed without marking: OnSent called %d times, want once", n)
	}

	never := newSentCounter()
	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "never", RequestID: "never", OnSent: never.onSent})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a request never sent: %v, want UNAVAILABLE", err)
	}
	if n := never.n.Load(); n != 0 {
		t.Errorf("a request never sent: OnSent called %d times, want never", n)
	}
}

// TestHTTPToolMarksSent: an HTTP tool tells OnSent once its request is
// written (while the upstream still holds it), and never when the
// upstream's port refuses the connection.
func TestHTTPToolMarksSent(t *testing.T) {
	app := newApp(t)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	for name, url := range map[string]string{"held": up.URL, "refused": refused} {
		fn, err := engine.HTTPTool{URL: url, Logger: quietLogger()}.Func()
		if err != nil {
			t.Fatal(err)
		}
		mustAdd(t, app, engine.ToolSpec{Name: name, Func: fn, MarksSent: true})
	}

	held := newSentCounter()
	done := make(chan error, 1)
	go func() {
		_, err := app.Call(context.Background(), alice, engine.Request{Tool: "held", RequestID: "held", OnSent: held.onSent})
		done <- err
	}()
	select {
	case <-held.first:
	case <-time.After(30 * time.Second):
		t.Fatal("the HTTP tool's request was not marked sent while the upstream held it")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	never := newSentCounter()
	_, err = app.Call(t.Context(), alice, engine.Request{Tool: "refused", RequestID: "refused", OnSent: never.onSent})
	if !errors.Is(err, engine.ErrNotSent) {
		t.Errorf("a refused connection: %v, want the not-sent refusal", err)
	}
	if n := never.n.Load(); n != 0 {
		t.Errorf("a refused connection: OnSent called %d times, want never", n)
	}
	if n := held.n.Load(); n != 1 {
		t.Errorf("the held request: OnSent called %d times, want once", n)
	}
}
