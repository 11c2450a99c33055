package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

// TestSnapshotStreamMatchesMarshal: the snapshot written one record at a
// time is byte for byte what json.Marshal gives for the whole, so its
// readers (RestoreSnapshot, and the snapshots of earlier builds they
// read) are unchanged: empty or not, with or without an index, bounds and
// nodes, and payloads that encoding/json escapes.
func TestSnapshotStreamMatchesMarshal(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	full := NewProcessor()
	full.Apply(1, SetLimits(500, 1<<20))
	full.Apply(2, SetNode(NodeInfo{ID: "n1", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"}))
	for i := range 40 {
		k := store.Key{Principal: "p", Session: fmt.Sprintf("s%d", i%3), RequestID: fmt.Sprintf("r%d", i)}
		ex := store.Execution{ID: fmt.Sprintf("e%d", i), Tool: "t<&>", NodeID: "n1", StartedAt: at}
		token := Token(uint64(10+i), i%5)
		if r := full.Apply(token, Reserve(k, "fp", ex)); r.Code != "" {
			t.Fatalf("reserve: %+v", r)
		}
		if i%2 == 0 {
			res := store.Result{ExecutionID: ex.ID, Status: store.StatusCompleted, Data: json.RawMessage(`{"html":"<b>&amp;</b>","n":[1,2.5e3]}`), FinishedAt: at.Add(time.Second)}
			if r := full.Apply(token+1, Complete(k, "fp", res)); r.Code != "" {
				t.Fatalf("complete: %+v", r)
			}
		}
	}
	for name, d := range map[string]snapshotData{
		"empty":        NewProcessor().snapshot(),
		"nil slices":   {Version: snapshotJSONVersion, Capacity: 1},
		"full":         full.snapshot(),
		"full indexed": func() snapshotData { d := full.snapshot(); d.Index = 12345; return d }(),
	} {
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := d.writeJSON(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: streamed\n%s\nwant\n%s", name, got.Bytes(), want)
		}
	}
}

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
		if err := p.snapshot().writeJSON(&failingWriter{n: n}); err == nil {
			t.Errorf("a write of JSON failing after %d bytes: no error", n)
		}
	}
}
