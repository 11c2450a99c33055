package fsm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// Small pools, so that random commands collide: the same identities,
// execution ids and nodes come back again and again.
var (
	propKeys = []store.Key{
		{Principal: "alice", Session: "s1", RequestID: "r1"},
		{Principal: "alice", Session: "s1", RequestID: "r2"},
		{Principal: "alice", Session: "", RequestID: "r1"},
		{Principal: "bob", Session: "s1", RequestID: "r1"},
		{Principal: "bob", Session: "s2", RequestID: "r3"},
		{Principal: "carol", Session: "s1", RequestID: "r4"},
	}
	propIDs      = []string{"e1", "e2", "e3", "e4", "e5", "e6", "e7"}
	propFPs      = []string{"fp-a", "fp-b"}
	propNodes    = []string{"n1", "n2", "n3"}
	propFinished = []store.Status{store.StatusCompleted, store.StatusFailed, store.StatusTimedOut, store.StatusCancelled}
	propData     = []string{`1`, `{"ok":true}`, `"text"`, `null`, `[1,2,{"a":[]}]`, `-0.5e10`}
	// Weighted command kinds: reservations and completions dominate (rapid
	// favours the ends of the list, so reserve sits at both).
	propKinds = []fsm.Type{
		fsm.TypeReserve, fsm.TypeReserve, fsm.TypeComplete, fsm.TypeComplete,
		fsm.TypeCancel, fsm.TypeResolve, fsm.TypeRelease, fsm.TypeRelease,
		fsm.TypeInterrupt, fsm.TypeExpire, fsm.TypeCapacity, fsm.TypeNode,
		fsm.TypeNodeRemoved, fsm.TypeComplete, fsm.TypeReserve, fsm.TypeReserve,
	}
)

func drawTime(t *rapid.T, label string) time.Time {
	return t0.Add(time.Duration(rapid.IntRange(0, 120).Draw(t, label)) * time.Minute)
}

// drawResult returns a result for id, with the given status or a random
// final one; one in twenty has no finish time and is invalid.
func drawResult(t *rapid.T, id string, statuses []store.Status) store.Result {
	st := rapid.SampledFrom(statuses).Draw(t, "status")
	r := store.Result{ExecutionID: id, Status: st, FinishedAt: drawTime(t, "finished_at")}
	if st == store.StatusCompleted {
		r.Data = json.RawMessage(rapid.SampledFrom(propData).Draw(t, "data"))
	} else {
		code := rapid.SampledFrom([]string{"TOOL_ERROR", "TIMEOUT", "CANCELLED", "E42"}).Draw(t, "code")
		r.Error = json.RawMessage(fmt.Sprintf(`{"code":%q,"message":"m"}`, code))
	}
	if rapid.IntRange(0, 19).Draw(t, "broken") == 0 {
		r.FinishedAt = time.Time{}
	}
	return r
}

// drawExecutionID picks, mostly, the execution id of a record that
// exists, so that settling commands find something to settle.
func drawExecutionID(t *rapid.T, recs []store.Record) string {
	if len(recs) > 0 && rapid.IntRange(0, 3).Draw(t, "existing") > 0 {
		return rapid.SampledFrom(recs).Draw(t, "record").ExecutionID
	}
	return rapid.SampledFrom(propIDs).Draw(t, "execution_id")
}

// drawCommand draws one command, biased by the current state (which is
// the same on every replica) towards commands that apply.
func drawCommand(t *rapid.T, p *fsm.Processor) fsm.Command {
	recs := p.State().Records()
	switch rapid.SampledFrom(propKinds).Draw(t, "kind") {
	case fsm.TypeReserve:
		exec := store.Execution{
			ID:        rapid.SampledFrom(propIDs).Draw(t, "execution_id"),
			Tool:      rapid.SampledFrom([]string{"create_order", "echo"}).Draw(t, "tool"),
			NodeID:    rapid.SampledFrom(propNodes).Draw(t, "node"),
			StartedAt: drawTime(t, "started_at"),
		}
		return fsm.Reserve(rapid.SampledFrom(propKeys).Draw(t, "key"), rapid.SampledFrom(propFPs).Draw(t, "fp"), exec)
	case fsm.TypeComplete:
		k := rapid.SampledFrom(propKeys).Draw(t, "key")
		f := rapid.SampledFrom(propFPs).Draw(t, "fp")
		owner := rapid.SampledFrom(propIDs).Draw(t, "owner")
		if r, err := p.State().Lookup(k); err == nil {
			if rapid.IntRange(0, 4).Draw(t, "right fp") > 0 {
				f = r.Fingerprint
			}
			if rapid.IntRange(0, 4).Draw(t, "right owner") > 0 {
				owner = r.ExecutionID
			}
		}
		return fsm.Complete(k, f, drawResult(t, owner, propFinished))
	case fsm.TypeCancel:
		id := drawExecutionID(t, recs)
		statuses := []store.Status{store.StatusCancelled, store.StatusCancelled, store.StatusCancelled, store.StatusCompleted}
		return fsm.Cancel(id, drawResult(t, id, statuses))
	case fsm.TypeResolve:
		id := drawExecutionID(t, recs)
		statuses := []store.Status{store.StatusCompleted, store.StatusFailed, store.StatusFailed, store.StatusTimedOut}
		return fsm.Resolve(id, store.Resolution{Result: drawResult(t, id, statuses), AllowRunning: rapid.Bool().Draw(t, "allow_running")})
	case fsm.TypeRelease:
		return fsm.Release(drawExecutionID(t, recs), rapid.Bool().Draw(t, "allow_running"))
	case fsm.TypeInterrupt:
		return fsm.Interrupt(rapid.SampledFrom(propNodes).Draw(t, "node"))
	case fsm.TypeExpire:
		if rapid.IntRange(0, 9).Draw(t, "zero cutoff") == 0 {
			return fsm.Expire(time.Time{})
		}
		return fsm.Expire(t0.Add(time.Duration(rapid.IntRange(-10, 130).Draw(t, "cutoff")) * time.Minute))
	case fsm.TypeCapacity:
		return fsm.SetLimits(rapid.IntRange(-1, 7).Draw(t, "capacity"), 0)
	case fsm.TypeNode:
		id := rapid.SampledFrom(propNodes).Draw(t, "node")
		port := rapid.IntRange(7000, 7003).Draw(t, "port")
		return fsm.SetNode(fsm.NodeInfo{ID: id, RaftAddr: fmt.Sprintf("%s:%d", id, port), HTTPAddr: fmt.Sprintf("%s:%d", id, port+1000)})
	default:
		return fsm.RemoveNode(rapid.SampledFrom(propNodes).Draw(t, "node"))
	}
}

// TestPropertyDeterministic applies random command sequences to two
// processors, one with the commands as built, the other with them as read
// back from the log (and, now and then, replaced by a processor restored
// from its own snapshot). Both must answer every command alike and end in
// the same state, and every step must keep the invariants.
func TestPropertyDeterministic(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		a, b := fsm.NewProcessor(), fsm.NewProcessor()
		index := uint64(0)
		steps := rapid.IntRange(1, 150).Draw(t, "steps")
		for step := range steps {
			c := drawCommand(t, a)
			// Raft indexes grow, with gaps where other entries sit.
			index += uint64(rapid.IntRange(1, 3).Draw(t, "gap"))

			beforeRecs := a.State().Records()
			beforeSnap := mustSnapshot(t, a)
			beforeCap := a.State().Capacity()
			beforeSeq := a.State().LastSeq()
			beforeSet := a.CapacitySet()

			ra := a.Apply(index, c)
			decoded, err := fsm.Decode(mustEncode(t, c))
			if err != nil {
				t.Fatalf("step %d: decode of an encoded %s: %v", step, c.Type, err)
			}
			rb := b.Apply(index, decoded)
			ja, jb := mustJSON(t, ra), mustJSON(t, rb)
			if !bytes.Equal(ja, jb) {
				t.Fatalf("step %d: %s at %d answered differently:\n%s\n%s", step, c.Type, index, ja, jb)
			}

			checkStep(t, a, c, index, ra, stepBefore{beforeRecs, beforeSnap, beforeCap, beforeSeq, beforeSet})
			checkResponseOverTheWire(t, ra)

			if rapid.IntRange(0, 14).Draw(t, "restore b") == 0 {
				b = mustRestore(t, mustSnapshot(t, b))
			}
		}

		sa, sb := mustSnapshot(t, a), mustSnapshot(t, b)
		if !bytes.Equal(sa, sb) {
			t.Fatalf("snapshots differ:\n%s\n%s", sa, sb)
		}
		if !a.Equal(b) || !b.Equal(a) {
			t.Fatal("processors differ")
		}
		r := mustRestore(t, sa)
		if !r.Equal(a) || !a.Equal(r) {
			t.Fatal("restored processor differs")
		}
		if sr := mustSnapshot(t, r); !bytes.Equal(sr, sa) {
			t.Fatalf("snapshot of the restored processor differs:\n%s\n%s", sr, sa)
		}
	})
}

type stepBefore struct {
	recs        []store.Record
	snapshot    []byte
	capacity    int
	lastSeq     uint64
	capacitySet bool
}

func (b stepBefore) byKey(k store.Key) (store.Record, bool) {
	i := slices.IndexFunc(b.recs, func(r store.Record) bool { return r.Key == k })
	if i < 0 {
		return store.Record{}, false
	}
	return b.recs[i], true
}

func (b stepBefore) byID(id string) (store.Record, bool) {
	i := slices.IndexFunc(b.recs, func(r store.Record) bool { return r.ExecutionID == id })
	if i < 0 {
		return store.Record{}, false
	}
	return b.recs[i], true
}

// checkStep checks the state p reached by applying c at index, which
// answered r, against the state before.
func checkStep(t *rapid.T, p *fsm.Processor, c fsm.Command, index uint64, r fsm.Response, before stepBefore) {
	t.Helper()
	st := p.State()
	after := st.Records()
	unchanged := bytes.Equal(before.snapshot, mustSnapshot(t, p))

	// The table's own invariants.
	ids := make(map[string]bool)
	keys := make(map[store.Key]bool)
	for i, rec := range after {
		if ids[rec.ExecutionID] {
			t.Fatalf("%s: two records of execution %s", c.Type, rec.ExecutionID)
		}
		if keys[rec.Key] {
			t.Fatalf("%s: two records of identity %s", c.Type, rec.Key)
		}
		ids[rec.ExecutionID], keys[rec.Key] = true, true
		if i > 0 && after[i-1].Seq >= rec.Seq {
			t.Fatalf("%s: seqs not strictly growing: %d then %d", c.Type, after[i-1].Seq, rec.Seq)
		}
		if rec.Seq == 0 || rec.Seq > st.LastSeq() {
			t.Fatalf("%s: seq %d outside (0, %d]", c.Type, rec.Seq, st.LastSeq())
		}
		if !rec.Status.Valid() {
			t.Fatalf("%s: status %q", c.Type, rec.Status)
		}
		if rec.Status.Finished() != !rec.FinishedAt.IsZero() {
			t.Fatalf("%s: %s record with finished_at %v", c.Type, rec.Status, rec.FinishedAt)
		}
		if rec.Resolved && !rec.Status.Finished() {
			t.Fatalf("%s: resolved but %s", c.Type, rec.Status)
		}
	}
	if st.Len() != len(after) {
		t.Fatalf("%s: Len %d, %d records", c.Type, st.Len(), len(after))
	}
	if st.LastSeq() < before.lastSeq {
		t.Fatalf("%s: LastSeq went back from %d to %d", c.Type, before.lastSeq, st.LastSeq())
	}
	// Nothing is evicted by pressure, and records only come from
	// reservations that found room.
	if st.Len() > max(st.Capacity(), len(before.recs)) {
		t.Fatalf("%s: %d records, capacity %d, %d before", c.Type, st.Len(), st.Capacity(), len(before.recs))
	}
	// A finished record never changes; an open one never reopens.
	for _, old := range before.recs {
		now, err := st.Lookup(old.Key)
		if err != nil || now.ExecutionID != old.ExecutionID || now.Seq != old.Seq {
			// Vacated (released, expired), and perhaps reserved again.
			continue
		}
		switch {
		case old.Status.Finished() && !sameRecord(t, now, old):
			t.Fatalf("%s: finished record changed:\n%+v\n%+v", c.Type, old, now)
		case old.Status == store.StatusInterrupted && now.Status == store.StatusRunning:
			t.Fatalf("%s: interrupted record running again", c.Type)
		case now.Status.Open() && !sameRecord(t, withStatus(now, old.Status), old):
			t.Fatalf("%s: open record changed beyond its status:\n%+v\n%+v", c.Type, old, now)
		}
	}

	// A refused command changes nothing.
	if r.Code != "" {
		if r.Err() == nil {
			t.Fatalf("%s: error %q but Err() is nil", c.Type, r.Code)
		}
		if !unchanged {
			t.Fatalf("%s: refused (%s) but the state changed", c.Type, r.Code)
		}
	} else if r.Err() != nil {
		t.Fatalf("%s: no error code but Err() = %v", c.Type, r.Err())
	}

	switch c.Type {
	case fsm.TypeReserve:
		checkReserve(t, p, c, index, r, before, unchanged)
	case fsm.TypeComplete:
		checkComplete(t, p, c, r, before)
	case fsm.TypeCancel, fsm.TypeResolve, fsm.TypeRelease:
		checkSettle(t, p, c, r, before)
	case fsm.TypeInterrupt:
		want := 0
		for _, old := range before.recs {
			if old.NodeID == c.NodeID && old.Status == store.StatusRunning {
				want++
			}
		}
		if r.Count != want {
			t.Fatalf("interrupt %s: count %d, want %d", c.NodeID, r.Count, want)
		}
		for _, rec := range after {
			if rec.NodeID == c.NodeID && rec.Status == store.StatusRunning {
				t.Fatalf("interrupt %s: %s still running", c.NodeID, rec.ExecutionID)
			}
		}
		if len(after) != len(before.recs) {
			t.Fatal("interrupt removed records")
		}
	case fsm.TypeExpire:
		if r.Count != len(before.recs)-len(after) {
			t.Fatalf("expire: count %d, %d records removed", r.Count, len(before.recs)-len(after))
		}
		for _, old := range before.recs {
			_, err := st.Get(old.ExecutionID)
			gone := errors.Is(err, store.ErrNotFound)
			if want := old.Status.Finished() && old.FinishedAt.Before(c.Cutoff); gone != want {
				t.Fatalf("expire %v: %s (%s, finished %v) removed=%v", c.Cutoff, old.ExecutionID, old.Status, old.FinishedAt, gone)
			}
		}
	case fsm.TypeCapacity:
		if (c.Capacity > 0) != (r.Code == "") {
			t.Fatalf("capacity %d: %+v", c.Capacity, r)
		}
		want := before.capacity
		if c.Capacity > 0 {
			want = c.Capacity
		}
		if st.Capacity() != want {
			t.Fatalf("capacity %d: now %d, want %d", c.Capacity, st.Capacity(), want)
		}
		if p.CapacitySet() != (before.capacitySet || c.Capacity > 0) {
			t.Fatalf("capacity %d: CapacitySet %v (was %v)", c.Capacity, p.CapacitySet(), before.capacitySet)
		}
	case fsm.TypeNode:
		if n, ok := p.Node(c.Node.ID); !ok || n != *c.Node {
			t.Fatalf("node %s: %+v %v", c.Node.ID, n, ok)
		}
	case fsm.TypeNodeRemoved:
		if _, ok := p.Node(c.NodeID); ok {
			t.Fatalf("node %s still known after its removal", c.NodeID)
		}
	}
	if c.Type != fsm.TypeCapacity && p.CapacitySet() != before.capacitySet {
		t.Fatalf("%s changed CapacitySet", c.Type)
	}
	nodes := p.Nodes()
	if !slices.IsSortedFunc(nodes, func(a, b fsm.NodeInfo) int { return strings.Compare(a.ID, b.ID) }) {
		t.Fatalf("Nodes() not sorted: %+v", nodes)
	}
}

func checkReserve(t *rapid.T, p *fsm.Processor, c fsm.Command, index uint64, r fsm.Response, before stepBefore, unchanged bool) {
	t.Helper()
	st := p.State()
	if old, ok := before.byKey(*c.Key); ok {
		want := store.Uncertain
		switch {
		case old.Fingerprint != c.Fingerprint:
			want = store.Conflict
		case old.Status.Finished():
			want = store.Replay
		}
		if r.Outcome != want || r.Code != "" || !sameRecord(t, r.Record, old) || !unchanged {
			t.Fatalf("reserve of a held identity (%s, %s): %+v, want %v with the record unchanged", old.Status, old.Fingerprint, r, want)
		}
		return
	}
	if _, used := before.byID(c.Execution.ID); used {
		if !errors.Is(r.Err(), store.ErrInvalid) {
			t.Fatalf("reserve with execution id %s in use: %+v", c.Execution.ID, r)
		}
		return
	}
	if len(before.recs) >= before.capacity {
		if !errors.Is(r.Err(), store.ErrCapacity) || r.Outcome != 0 {
			t.Fatalf("reserve with %d of %d: %+v, want capacity", len(before.recs), before.capacity, r)
		}
		return
	}
	if r.Outcome != store.Reserved || r.Record.Seq != index || r.Record.Status != store.StatusRunning ||
		r.Record.ExecutionID != c.Execution.ID || r.Record.Key != *c.Key {
		t.Fatalf("reserve at %d: %+v, want reserved", index, r)
	}
	if st.LastSeq() != index || st.Len() != len(before.recs)+1 || st.Len() > st.Capacity() {
		t.Fatalf("after reserve at %d: last seq %d, %d records (was %d), capacity %d",
			index, st.LastSeq(), st.Len(), len(before.recs), st.Capacity())
	}
	if got, err := st.Get(c.Execution.ID); err != nil || !sameRecord(t, got, r.Record) {
		t.Fatalf("reserved record %+v, stored %+v (%v)", r.Record, got, err)
	}
}

func checkComplete(t *rapid.T, p *fsm.Processor, c fsm.Command, r fsm.Response, before stepBefore) {
	t.Helper()
	old, held := before.byKey(*c.Key)
	var want error
	switch {
	case c.Result.Validate() != nil:
		want = store.ErrInvalid
	case !held:
		want = store.ErrNotFound
	case old.Fingerprint != c.Fingerprint:
		want = store.ErrConflict
	case old.ExecutionID != c.Result.ExecutionID || !old.Status.Open():
		want = store.ErrInvalidState
	}
	if want != nil {
		if !errors.Is(r.Err(), want) {
			t.Fatalf("complete: %v, want %v (record %+v)", r.Err(), want, old)
		}
		if (want == store.ErrConflict || want == store.ErrInvalidState) && !sameRecord(t, r.Record, old) {
			t.Fatalf("complete refused with %+v, want the record %+v", r.Record, old)
		}
		return
	}
	now, err := p.State().Lookup(*c.Key)
	if err != nil || r.Err() != nil || now.Status != c.Result.Status || !bytes.Equal(now.Data, c.Result.Data) ||
		!bytes.Equal(now.Error, c.Result.Error) || !now.FinishedAt.Equal(c.Result.FinishedAt) ||
		now.Seq != old.Seq || now.Resolved || !sameRecord(t, now, r.Record) {
		t.Fatalf("complete of %+v with %+v: %+v, stored %+v (%v)", old, *c.Result, r, now, err)
	}
}

// checkSettle checks cancel, resolve and release against the rules: who
// may settle which status.
func checkSettle(t *rapid.T, p *fsm.Processor, c fsm.Command, r fsm.Response, before stepBefore) {
	t.Helper()
	old, held := before.byID(c.ExecutionID)
	var (
		res     *store.Result
		allowed bool
		want    error
	)
	switch c.Type {
	case fsm.TypeCancel:
		res = c.Result
		allowed = old.Status == store.StatusRunning
		if res.Validate() != nil || res.Status != store.StatusCancelled || res.ExecutionID != c.ExecutionID {
			want = store.ErrInvalid
		}
	case fsm.TypeResolve:
		res = &c.Resolution.Result
		allowed = old.Status == store.StatusInterrupted || (old.Status == store.StatusRunning && c.Resolution.AllowRunning)
		if res.Validate() != nil || (res.Status != store.StatusCompleted && res.Status != store.StatusFailed) ||
			res.ExecutionID != c.ExecutionID {
			want = store.ErrInvalid
		}
	case fsm.TypeRelease:
		allowed = old.Status == store.StatusInterrupted || (old.Status == store.StatusRunning && c.AllowRunning)
	}
	switch {
	case want != nil:
	case !held:
		want = store.ErrNotFound
	case !allowed:
		want = store.ErrInvalidState
	}
	if want != nil {
		if !errors.Is(r.Err(), want) {
			t.Fatalf("%s of %+v: %v, want %v", c.Type, old, r.Err(), want)
		}
		var se *store.StateError
		if want == store.ErrInvalidState && (!errors.As(r.Err(), &se) || !sameRecord(t, se.Record, old)) {
			t.Fatalf("%s refused with %v, want the record %+v", c.Type, r.Err(), old)
		}
		return
	}
	now, err := p.State().Get(c.ExecutionID)
	if c.Type == fsm.TypeRelease {
		if !errors.Is(err, store.ErrNotFound) || !sameRecord(t, r.Record, old) {
			t.Fatalf("release of %+v: %+v, then Get: %v", old, r, err)
		}
		return
	}
	if err != nil || now.Status != res.Status || !bytes.Equal(now.Data, res.Data) || !bytes.Equal(now.Error, res.Error) ||
		now.Resolved != (c.Type == fsm.TypeResolve) || now.Seq != old.Seq || !sameRecord(t, now, r.Record) {
		t.Fatalf("%s of %+v: %+v, stored %+v (%v)", c.Type, old, r, now, err)
	}
}

// checkResponseOverTheWire checks that r keeps its meaning through JSON,
// as a follower that forwarded the command receives it.
func checkResponseOverTheWire(t *rapid.T, r fsm.Response) {
	t.Helper()
	b := mustJSON(t, r)
	var w fsm.Response
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("decode response %s: %v", b, err)
	}
	if again := mustJSON(t, w); !bytes.Equal(again, b) {
		t.Fatalf("response changed over the wire:\n%s\n%s", b, again)
	}
	e, we := r.Err(), w.Err()
	if store.CodeOf(e) != store.CodeOf(we) || (e == nil) != (we == nil) {
		t.Fatalf("Err() %v became %v", e, we)
	}
	for _, sentinel := range []error{store.ErrCapacity, store.ErrNotFound, store.ErrInvalidState, store.ErrConflict, store.ErrInvalid} {
		if errors.Is(e, sentinel) != errors.Is(we, sentinel) {
			t.Fatalf("Err() %v became %v (matching %v)", e, we, sentinel)
		}
	}
	var se, wse *store.StateError
	if errors.As(e, &se) != errors.As(we, &wse) || (se != nil && (se.Op != wse.Op || !sameRecord(t, se.Record, wse.Record))) {
		t.Fatalf("state error %v became %v", e, we)
	}
}

func withStatus(r store.Record, s store.Status) store.Record {
	r.Status = s
	return r
}
