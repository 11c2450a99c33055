package tracing_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/tracing"
)

// endSpans starts and ends n spans.
func endSpans(n int) {
	for range n {
		_, s := tracing.Start(context.Background(), tracing.SpanReserve)
		s.End()
	}
}

// TestBatchSize: a full batch is exported at once, long before the
// schedule delay; the rest waits for it.
func TestBatchSize(t *testing.T) {
	rec := &recorder{}
	use(t, rec, tracing.Options{MaxExportBatchSize: 3, ScheduleDelay: time.Hour})
	endSpans(7)
	waitFor(t, "two batches of 3 exported", func() bool { return len(rec.got()) >= 2 })
	got := rec.got()
	if len(got) != 2 || len(got[0]) != 3 || len(got[1]) != 3 {
		t.Errorf("batches of %v spans, want 3 and 3 (the 7th waits for the delay)", batchSizes(got))
	}
}

// TestScheduleDelay: a batch that is not full is exported once the
// schedule delay has passed.
func TestScheduleDelay(t *testing.T) {
	rec := &recorder{}
	use(t, rec, tracing.Options{ScheduleDelay: 20 * time.Millisecond})
	began := time.Now()
	endSpans(2)
	waitFor(t, "the batch exported", func() bool { return len(rec.spans()) == 2 })
	if took := time.Since(began); took < 20*time.Millisecond {
		t.Errorf("exported after %s, before the delay of 20ms", took)
	}
	if got := rec.got(); len(got) != 1 {
		t.Errorf("batches of %v spans, want one of 2", batchSizes(got))
	}
}

// TestDropWhenFull: with the exporter stuck, ending spans never waits: a
// full queue drops them, counts them and logs it; those queued are
// exported once the exporter is free again.
func TestDropWhenFull(t *testing.T) {
	var logs syncBuffer
	rec := &recorder{hold: make(chan struct{})}
	p := use(t, rec, tracing.Options{MaxQueueSize: 4, MaxExportBatchSize: 2, ScheduleDelay: time.Millisecond,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	done := make(chan struct{})
	go func() {
		defer close(done)
		endSpans(10_000)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("10 000 spans not ended in 10s with the exporter stuck: ending a span waits")
	}
	// At most one batch of 2 is with the exporter and 4 in the queue.
	if d := p.Dropped(); d < 10_000-6 {
		t.Errorf("%d spans dropped, want at least %d", d, 10_000-6)
	}
	close(rec.hold)
	flush(t, p)
	if n := len(rec.spans()); n < 4 || n > 6 || uint64(n)+p.Dropped() != 10_000 {
		t.Errorf("%d spans exported and %d dropped, want 4 to 6 exported, the rest dropped", n, p.Dropped())
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "spans dropped") {
		t.Errorf("log %q, want a warning of the spans dropped", out)
	}
}

// TestShutdownFlushes: Shutdown exports what the queue holds, in batches
// of the batch size, though the delay is far off; ending a span after it
// exports nothing.
func TestShutdownFlushes(t *testing.T) {
	rec := &recorder{}
	p := use(t, rec, tracing.Options{MaxExportBatchSize: 4, ScheduleDelay: time.Hour})
	endSpans(3)
	_, late := tracing.Start(context.Background(), tracing.SpanTool)
	if n := len(rec.got()); n != 0 {
		t.Fatalf("%d batches before the delay or Shutdown", n)
	}
	endSpans(6)
	flush(t, p)
	if got := rec.got(); len(rec.spans()) != 9 || len(got[0]) != 4 {
		t.Errorf("batches of %v spans at shutdown, want 9 spans in batches of 4", batchSizes(got))
	}
	late.End()
	if n := len(rec.spans()); n != 9 {
		t.Errorf("%d spans exported after a span ended after Shutdown, want 9", n)
	}
}

// TestShutdownGivesUp: with the exporter stuck, Shutdown returns its
// context's error at its deadline, and the export is cancelled.
func TestShutdownGivesUp(t *testing.T) {
	rec := &recorder{hold: make(chan struct{})}
	p := tracing.NewProvider(rec, tracing.Options{ScheduleDelay: time.Hour})
	tracing.Use(p)
	endSpans(1)
	tracing.Use(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want its deadline", err)
	}
	if err := p.Shutdown(context.Background()); err != nil { // the export was cancelled: the batcher ends
		t.Errorf("Shutdown again = %v", err)
	}
	if n := len(rec.spans()); n != 0 {
		t.Errorf("%d spans exported by a stuck exporter", n)
	}
}

func batchSizes(batches [][]tracing.Record) []int {
	var n []int
	for _, b := range batches {
		n = append(n, len(b))
	}
	return n
}

// syncBuffer is a log destination safe for the batcher's goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
