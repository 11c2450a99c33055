package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// actorStore records the actor (store.ActorFrom) of each decision it is
// asked for.
type actorStore struct {
	store.Store
	mu     sync.Mutex
	actors map[string]string // "op execution_id" → actor
}

func (s *actorStore) saw(ctx context.Context, op, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.actors[op+" "+id] = store.ActorFrom(ctx)
}

func (s *actorStore) Cancel(ctx context.Context, id string, res store.Result) (store.Record, error) {
	s.saw(ctx, "cancel", id)
	return s.Store.Cancel(ctx, id, res)
}

func (s *actorStore) Resolve(ctx context.Context, id string, r store.Resolution) (store.Record, error) {
	s.saw(ctx, "resolve", id)
	return s.Store.Resolve(ctx, id, r)
}

func (s *actorStore) Release(ctx context.Context, id string, allowRunning bool) (store.Record, error) {
	s.saw(ctx, "release", id)
	return s.Store.Release(ctx, id, allowRunning)
}

// TestDecisionsNameTheirActor: a cancel, a resolve and a release tell the
// store who decided (the caller's principal), whichever transport called
// the runtime: the audit ledger records it.
func TestDecisionsNameTheirActor(t *testing.T) {
	app := newApp(t)
	s := &actorStore{Store: store.NewMemory(10), actors: map[string]string{}}
	app.IdempotencyStore(engine.Basic{Store: s})
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	running := seeded(t, app, "alice", "", "r1", "t", "node9")
	resolved := seeded(t, app, "alice", "", "r2", "t", "node9")
	released := seeded(t, app, "alice", "", "r3", "t", "node9")
	if _, err := app.Cancel(t.Context(), alice, running); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Store().MarkInterrupted(t.Context(), "node9"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Resolve(t.Context(), alice, resolved, engine.Resolution{Status: "completed", Data: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Resolve(t.Context(), alice, released, engine.Resolution{Status: engine.ResolutionReleased}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"cancel " + running, "resolve " + resolved, "release " + released} {
		if s.actors[k] != "alice" {
			t.Errorf("%s: actor %q, want alice (all: %v)", k, s.actors[k], s.actors)
		}
	}
}
