package fsm_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// TestDedupeWindowReplicasAgree: the dedupe window (docs/mcp.md#calls-without-a-request-id-dedupe_window) is decided
// from the times in the commands alone. Replicas that apply one log (in
// one batch, entry by entry, or from a snapshot taken halfway) reach the
// same state and the same answers: a replay within the window, a fresh
// reservation that replaces the finished record after it.
func TestDedupeWindowReplicasAgree(t *testing.T) {
	const window = 10 * time.Minute
	k := key("~00112233445566778899aabbccddeeff")
	at := func(id string, d time.Duration) store.Execution {
		ex := execution(id, "node-a")
		ex.StartedAt = t0.Add(d)
		ex.DedupeWindow = window
		return ex
	}
	cmds := []fsm.Command{
		fsm.SetLimits(10, 0),
		fsm.Reserve(k, fp, at("exec_1", 0)),
		fsm.Complete(k, fp, completed("exec_1", `1`, t0.Add(time.Second))),
		fsm.Reserve(k, fp, at("exec_2", window-time.Millisecond)), // within: replay of exec_1
		fsm.Reserve(k, fp, at("exec_3", window)),                  // at the end: replaces exec_1
		fsm.Reserve(k, fp, at("exec_4", 3*window)),                // exec_3 runs: uncertain
		fsm.Complete(k, fp, completed("exec_3", `3`, t0.Add(window+time.Second))),
		fsm.Reserve(k, fp, at("exec_5", 2*window-time.Millisecond)), // within exec_3's: replay
	}
	logs := make([]*raft.Log, len(cmds))
	for i, c := range cmds {
		logs[i] = commandLog(t, uint64(i+1), c)
	}

	batch := fsm.New()
	answers := batch.ApplyBatch(logs)
	want := []struct {
		outcome store.Outcome
		exec    string
	}{3: {store.Replay, "exec_1"}, 4: {store.Reserved, "exec_3"}, 5: {store.Uncertain, "exec_3"}, 7: {store.Replay, "exec_3"}}
	for i, w := range want {
		if w.exec == "" {
			continue
		}
		r := only(t, answers[i])
		if err := r.Err(); err != nil || r.Outcome != w.outcome || r.Record.ExecutionID != w.exec {
			t.Errorf("entry %d: %v %v %s, want %v %s", i+1, err, r.Outcome, r.Record.ExecutionID, w.outcome, w.exec)
		}
	}
	if _, err := batch.Get("exec_1"); err == nil {
		t.Error("the replaced record exec_1 is still there")
	}
	if st := batch.Stats(); st.Entries != 1 {
		t.Errorf("entries %d, want 1", st.Entries)
	}

	one := fsm.New()
	for _, l := range logs {
		one.Apply(l)
	}
	half := fsm.New()
	half.ApplyBatch(logs[:4])
	restored := fsm.New()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(mustPersist(t, half)))); err != nil {
		t.Fatal(err)
	}
	restored.ApplyBatch(logs[4:])
	h := mustHash(t, batch)
	for name, f := range map[string]*fsm.FSM{"entry by entry": one, "restored halfway": restored} {
		if got := mustHash(t, f); got != h {
			t.Errorf("%s: state %s, want %s", name, got, h)
		}
	}
	// And a snapshot of the end restores the same state.
	again := fsm.New()
	if err := again.Restore(io.NopCloser(bytes.NewReader(mustPersist(t, batch)))); err != nil {
		t.Fatal(err)
	}
	if got := mustHash(t, again); got != h {
		t.Errorf("restored at the end: %s, want %s", got, h)
	}
}
