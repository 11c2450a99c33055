package engine_test

import (
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// tally is an Observer, RefusalObserver and ProbeObserver that counts
// what it is told.
type tally struct {
	mu  sync.Mutex
	got map[string]int
}

func (o *tally) add(what string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.got == nil {
		o.got = map[string]int{}
	}
	o.got[what]++
}

func (o *tally) count(what string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.got[what]
}

func (o *tally) ToolFinished(tool string, status store.Status, _ time.Duration) {
	o.add("tool " + tool + " " + string(status))
}
func (o *tally) StoreWrite(op, outcome string, _ time.Duration) { o.add(op + " " + outcome) }
func (o *tally) Refused(reason string)                          { o.add("refused " + reason) }

// TestAddObserver checks that an observer added after the runtime was
// made is told what the runtime does from then on, as one given to
// WithObserver is, refusals included; and that a nil one is ignored.
func TestAddObserver(t *testing.T) {
	first, late := &tally{}, &tally{}
	app := newApp(t, engine.WithObserver(first), engine.WithMaxRunning(1))
	app.AddObserver(nil)
	app.AddObserver(late)
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "slow", Func: g.fn})
	c := &counter{}
	mustAdd(t, app, engine.ToolSpec{Name: "echo", Func: c.fn})

	call(t, app, engine.Request{Tool: "echo", RequestID: "r1"})
	done := make(chan error, 1)
	go func() {
		_, err := app.Call(t.Context(), alice, engine.Request{Tool: "slow", RequestID: "r2"})
		done <- err
	}()
	<-g.started
	if _, err := app.Call(t.Context(), alice, engine.Request{Tool: "echo", RequestID: "r3"}); err == nil {
		t.Fatal("a call over MaxRunning was not refused")
	}
	close(g.release)
	if err := <-done; err != nil {
		t.Fatalf("the slow call: %v", err)
	}
	for _, o := range []*tally{first, late} {
		for what, want := range map[string]int{
			"tool echo completed":               1,
			"tool slow completed":               1,
			"reserve reserved":                  2,
			"complete ok":                       2,
			"refused " + engine.LimitMaxRunning: 1,
		} {
			if got := o.count(what); got != want {
				t.Errorf("%q told %d times, want %d", what, got, want)
			}
		}
	}
}
