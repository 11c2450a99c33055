package cluster_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

// unknownOnce applies each Reserve, Complete and MarkInterrupted, then
// says the first of each was of unknown outcome, as a leader lost
// mid-commit does.
type unknownOnce struct {
	store.Store
	reserves, completes, marks int
}

func (u *unknownOnce) Reserve(ctx context.Context, k store.Key, fp string, ex store.Execution) (store.Reservation, error) {
	res, err := u.Store.Reserve(ctx, k, fp, ex)
	if u.reserves++; u.reserves == 1 && err == nil {
		return store.Reservation{}, store.ErrCommitUnknown
	}
	return res, err
}

func (u *unknownOnce) Complete(ctx context.Context, k store.Key, fp string, res store.Result) (store.Record, error) {
	rec, err := u.Store.Complete(ctx, k, fp, res)
	if u.completes++; u.completes == 1 && err == nil {
		return store.Record{}, store.ErrCommitUnknown
	}
	return rec, err
}

func (u *unknownOnce) MarkInterrupted(ctx context.Context, node string) (int, error) {
	n, err := u.Store.MarkInterrupted(ctx, node)
	if u.marks++; u.marks == 1 && err == nil {
		return 0, store.ErrCommitUnknown
	}
	return n, err
}

// TestRoundRobinFindsOutUnknownWrites holds the conformance harness to
// what the Store contract asks of a caller after an unknown outcome: a
// reservation that applied is this call's (its retry is answered
// uncertain), a completion that applied is answered with its record, and
// MarkInterrupted counts what it marked, not what its retry marked.
func TestRoundRobinFindsOutUnknownWrites(t *testing.T) {
	ctx := context.Background()
	r := &roundRobin{stores: []store.Store{&unknownOnce{Store: store.NewMemory(10)}}}
	at := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	reserve := func(id, node string) store.Key {
		k := store.Key{Principal: "p", Session: "s", RequestID: id}
		res, err := r.Reserve(ctx, k, "fp", store.Execution{ID: "exec_" + id, Tool: "t", NodeID: node, StartedAt: at})
		if err != nil || res.Outcome != store.Reserved || res.Record.ExecutionID != "exec_"+id {
			t.Fatalf("Reserve(%s) = %v %+v, %v; want this execution reserved", id, res.Outcome, res.Record, err)
		}
		return k
	}
	k := reserve("r1", "node-a")
	rec, err := r.Complete(ctx, k, "fp", store.Result{ExecutionID: "exec_r1", Status: store.StatusCompleted, Data: json.RawMessage(`{}`), FinishedAt: at})
	if err != nil || rec.Status != store.StatusCompleted || rec.ExecutionID != "exec_r1" {
		t.Fatalf("Complete after an unknown outcome = %+v, %v; want the completed record", rec, err)
	}
	reserve("r2", "node-x")
	reserve("r3", "node-x")
	if n, err := r.MarkInterrupted(ctx, "node-x"); err != nil || n != 2 {
		t.Fatalf("MarkInterrupted after an unknown outcome = %d, %v; want 2", n, err)
	}
}
