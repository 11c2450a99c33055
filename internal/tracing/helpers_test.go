package tracing_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/tracing"
)

// recorder is an Exporter that keeps copies of the batches it is given;
// while hold is open, an export waits for it (or for its context).
type recorder struct {
	mu      sync.Mutex
	batches [][]tracing.Record
	hold    chan struct{}
}

func (r *recorder) Export(ctx context.Context, spans []*tracing.Record) error {
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	batch := make([]tracing.Record, len(spans))
	for i, s := range spans {
		batch[i] = *s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, batch)
	return nil
}

// got returns the batches exported so far.
func (r *recorder) got() [][]tracing.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]tracing.Record(nil), r.batches...)
}

// spans returns the spans exported so far, in order.
func (r *recorder) spans() []tracing.Record {
	var all []tracing.Record
	for _, b := range r.got() {
		all = append(all, b...)
	}
	return all
}

// waitFor polls cond until it holds, failing t after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not after 10s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// use turns tracing on with a provider exporting to rec as opts say, and
// returns it; it is shut down and tracing turned off at cleanup.
func use(t *testing.T, rec *recorder, opts tracing.Options) *tracing.Provider {
	t.Helper()
	p := tracing.NewProvider(rec, opts)
	tracing.Use(p)
	t.Cleanup(func() {
		tracing.Use(nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p.Shutdown(ctx)
	})
	return p
}

// flush shuts p down, failing t if its spans are not all exported.
func flush(t *testing.T, p *tracing.Provider) {
	t.Helper()
	tracing.Use(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
