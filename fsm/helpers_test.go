package fsm_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// fataler is what the helpers need of a *testing.T, *testing.F or
// *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// t0 is the fixed time the fixtures start at: commands carry their times,
// so tests never read the clock.
var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

const fp = "fp-a"

func key(requestID string) store.Key {
	return store.Key{Principal: "alice", Session: "s1", RequestID: requestID}
}

func execution(id, node string) store.Execution {
	return store.Execution{ID: id, Tool: "create_order", NodeID: node, StartedAt: t0}
}

func completed(id, data string, at time.Time) store.Result {
	return store.Result{ExecutionID: id, Status: store.StatusCompleted, Data: json.RawMessage(data), FinishedAt: at}
}

func failedWith(id string, st store.Status, code string, at time.Time) store.Result {
	return store.Result{
		ExecutionID: id,
		Status:      st,
		Error:       json.RawMessage(fmt.Sprintf(`{"code":%q,"message":"it went wrong"}`, code)),
		FinishedAt:  at,
	}
}

func cancelled(id string, at time.Time) store.Result {
	return failedWith(id, store.StatusCancelled, "CANCELLED", at)
}

// proc is a Processor fed with growing log indexes, as Raft would.
type proc struct {
	tb    testing.TB
	p     *fsm.Processor
	index uint64
}

func newProc(tb testing.TB) *proc {
	tb.Helper()
	return &proc{tb: tb, p: fsm.NewProcessor()}
}

// apply applies c at the next index.
func (x *proc) apply(c fsm.Command) fsm.Response {
	x.index++
	return x.p.Apply(x.index, c)
}

// mustOK applies c and fails the test when the response carries an error.
func (x *proc) mustOK(c fsm.Command) fsm.Response {
	x.tb.Helper()
	r := x.apply(c)
	if err := r.Err(); err != nil {
		x.tb.Fatalf("%s: %v", c.Type, err)
	}
	return r
}

// mustReserve reserves requestID for execution id on node and checks the
// outcome is Reserved.
func (x *proc) mustReserve(requestID, id, node string) store.Record {
	x.tb.Helper()
	r := x.mustOK(fsm.Reserve(key(requestID), fp, execution(id, node)))
	if r.Outcome != store.Reserved {
		x.tb.Fatalf("reserve %s: outcome %v, want reserved", requestID, r.Outcome)
	}
	return r.Record
}

func (x *proc) mustGet(id string) store.Record {
	x.tb.Helper()
	r, err := x.p.State().Get(id)
	if err != nil {
		x.tb.Fatalf("get %s: %v", id, err)
	}
	return r
}

func (x *proc) snapshot() []byte {
	x.tb.Helper()
	return mustSnapshot(x.tb, x.p)
}

func mustSnapshot(tb fataler, p *fsm.Processor) []byte {
	tb.Helper()
	b, err := p.MarshalSnapshot()
	if err != nil {
		tb.Fatalf("marshal snapshot: %v", err)
	}
	return b
}

func mustRestore(tb fataler, b []byte) *fsm.Processor {
	tb.Helper()
	p := fsm.NewProcessor()
	if err := p.RestoreSnapshot(bytes.NewReader(b)); err != nil {
		tb.Fatalf("restore snapshot: %v", err)
	}
	return p
}

func mustEncode(tb fataler, c fsm.Command) []byte {
	tb.Helper()
	b, err := fsm.Encode(c)
	if err != nil {
		tb.Fatalf("encode %s: %v", c.Type, err)
	}
	return b
}

func mustJSON(tb fataler, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatalf("json: %v", err)
	}
	return b
}

// seeded returns a processor holding one record of each status and two
// members, at log indexes 1 to 11.
func seeded(tb testing.TB) *proc {
	tb.Helper()
	x := newProc(tb)
	x.mustOK(fsm.SetLimits(10, 0))
	x.mustOK(fsm.SetNode(fsm.NodeInfo{ID: "n1", RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8001"}))
	x.mustOK(fsm.SetNode(fsm.NodeInfo{ID: "n2", RaftAddr: "127.0.0.1:7002", HTTPAddr: "127.0.0.1:8002"}))
	x.mustReserve("run", "e-run", "n1")
	x.mustReserve("int", "e-int", "n2")
	x.mustOK(fsm.Interrupt("n2"))
	x.mustReserve("done", "e-done", "n1")
	x.mustOK(fsm.Complete(key("done"), fp, completed("e-done", `{"order_id":1}`, t0.Add(time.Minute))))
	x.mustReserve("fail", "e-fail", "n1")
	x.mustOK(fsm.Complete(key("fail"), fp, failedWith("e-fail", store.StatusFailed, "TOOL_ERROR", t0.Add(2*time.Minute))))
	return x
}

// normalize returns a copy of c with only the fields its type uses (the
// others are not written to the log), times in UTC and raw JSON in the
// form Encode writes it, so that commands equal in meaning compare equal
// with reflect.DeepEqual.
func normalize(tb fataler, c fsm.Command) fsm.Command {
	tb.Helper()
	c = payloadOnly(c)
	raw := func(m json.RawMessage) json.RawMessage {
		if m == nil {
			return nil
		}
		b, err := json.Marshal(m)
		if err != nil {
			tb.Fatalf("raw JSON %q: %v", m, err)
		}
		return b
	}
	res := func(r store.Result) store.Result {
		r.Data, r.Error, r.FinishedAt = raw(r.Data), raw(r.Error), r.FinishedAt.UTC()
		return r
	}
	c.Cutoff = c.Cutoff.UTC()
	if c.Key != nil {
		k := *c.Key
		c.Key = &k
	}
	if c.Execution != nil {
		e := *c.Execution
		e.StartedAt = e.StartedAt.UTC()
		c.Execution = &e
	}
	if c.Result != nil {
		r := res(*c.Result)
		c.Result = &r
	}
	if c.Resolution != nil {
		r := *c.Resolution
		r.Result = res(r.Result)
		c.Resolution = &r
	}
	if c.Node != nil {
		n := *c.Node
		c.Node = &n
	}
	return c
}

// payloadOnly returns c with only the fields of its type.
func payloadOnly(c fsm.Command) fsm.Command {
	out := fsm.Command{Type: c.Type}
	switch c.Type {
	case fsm.TypeReserve:
		out.Key, out.Fingerprint, out.Execution = c.Key, c.Fingerprint, c.Execution
	case fsm.TypeComplete:
		out.Key, out.Fingerprint, out.Result = c.Key, c.Fingerprint, c.Result
	case fsm.TypeCancel:
		out.ExecutionID, out.Result = c.ExecutionID, c.Result
	case fsm.TypeResolve:
		out.ExecutionID, out.Resolution = c.ExecutionID, c.Resolution
	case fsm.TypeRelease:
		out.ExecutionID, out.AllowRunning = c.ExecutionID, c.AllowRunning
	case fsm.TypeInterrupt, fsm.TypeNodeRemoved:
		out.NodeID = c.NodeID
	case fsm.TypeExpire:
		out.Cutoff = c.Cutoff
	case fsm.TypeCapacity:
		out.Capacity, out.MaxBytes = c.Capacity, c.MaxBytes
	case fsm.TypeNode:
		out.Node = c.Node
	default:
		return c
	}
	return out
}

func sameCommand(tb fataler, a, b fsm.Command) bool {
	tb.Helper()
	return reflect.DeepEqual(normalize(tb, a), normalize(tb, b))
}

// sameRecord compares records by their JSON form (times and raw JSON as
// written on the wire).
func sameRecord(tb fataler, a, b store.Record) bool {
	tb.Helper()
	return bytes.Equal(mustJSON(tb, a), mustJSON(tb, b))
}
