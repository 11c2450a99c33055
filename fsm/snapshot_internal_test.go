package fsm

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

// failingWriter fails every write after the first n bytes.
type failingWriter struct{ n int }

func (w *failingWriter) Write(b []byte) (int, error) {
	if len(b) > w.n {
		k := w.n
		w.n = 0
		return k, fmt.Errorf("disk full")
	}
	w.n -= len(b)
	return len(b), nil
}

// TestSnapshotStreamWriteError: a write that fails (a full disk) fails
// the snapshot, however far in it happens.
func TestSnapshotStreamWriteError(t *testing.T) {
	p := NewProcessor()
	for i := range 3000 {
		k := store.Key{Principal: "p", RequestID: fmt.Sprintf("r%d", i)}
		p.Apply(uint64(i+1), Reserve(k, "fp", store.Execution{ID: fmt.Sprintf("e%d", i), Tool: "t", NodeID: "n1", StartedAt: time.Unix(1, 0).UTC()}))
	}
	for _, n := range []int{0, 10, 40 << 10} {
		if err := p.snapshot().writeTo(&failingWriter{n: n}); err == nil {
			t.Errorf("a write failing after %d bytes: no error", n)
		}
	}
}

// TestSnapshotOrder: a snapshot holds the records in Seq order and the
// nodes in id order, whatever order they were applied in, so that equal
// states give equal bytes.
func TestSnapshotOrder(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	p := NewProcessor()
	for i, id := range []string{"n3", "n1", "n2"} {
		p.Apply(uint64(i+1), SetNode(NodeInfo{ID: id}))
	}
	for i := range 30 {
		k := store.Key{Principal: "p", Session: fmt.Sprintf("s%d", i%4), RequestID: fmt.Sprintf("r%d", 29-i)}
		ex := store.Execution{ID: fmt.Sprintf("e%d", 29-i), Tool: "t", NodeID: "n1", StartedAt: at}
		if r := p.Apply(Token(uint64(10+i), i%3), Reserve(k, "fp", ex)); r.Code != "" {
			t.Fatalf("reserve: %+v", r)
		}
		if i%2 == 0 {
			res := store.Result{ExecutionID: ex.ID, Status: store.StatusCompleted, Data: json.RawMessage(`1`), FinishedAt: at}
			if r := p.Apply(Token(uint64(10+i), 4), Complete(k, "fp", res)); r.Code != "" {
				t.Fatalf("complete: %+v", r)
			}
		}
	}
	d := p.snapshot()
	if len(d.Records) != 30 || len(d.Nodes) != 3 {
		t.Fatalf("%d records and %d nodes, want 30 and 3", len(d.Records), len(d.Nodes))
	}
	for i := 1; i < len(d.Records); i++ {
		if d.Records[i-1].Seq >= d.Records[i].Seq {
			t.Fatalf("records not ordered by seq: %d then %d", d.Records[i-1].Seq, d.Records[i].Seq)
		}
	}
	for i := 1; i < len(d.Nodes); i++ {
		if d.Nodes[i-1].ID >= d.Nodes[i].ID {
			t.Fatalf("nodes not ordered by id: %q then %q", d.Nodes[i-1].ID, d.Nodes[i].ID)
		}
	}
}
