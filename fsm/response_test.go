package fsm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// overTheWire returns r as a forwarding follower receives it: encoded by
// the leader, decoded by the follower.
func overTheWire(tb testing.TB, r fsm.Response) fsm.Response {
	tb.Helper()
	b := mustJSON(tb, r)
	var got fsm.Response
	if err := json.Unmarshal(b, &got); err != nil {
		tb.Fatalf("decode response %s: %v", b, err)
	}
	if again := mustJSON(tb, got); !bytes.Equal(again, b) {
		tb.Fatalf("response changed over the wire:\n%s\n%s", b, again)
	}
	return got
}

// overBinary returns r as a follower receives it over the forward stream:
// in its binary form (fsm.AppendResponse, fsm.DecodeResponse).
func overBinary(tb testing.TB, r fsm.Response) fsm.Response {
	tb.Helper()
	b, err := fsm.AppendResponse(nil, r)
	if err != nil {
		tb.Fatalf("encode response %+v: %v", r, err)
	}
	got, err := fsm.DecodeResponse(b)
	if err != nil {
		tb.Fatalf("decode response %x: %v", b, err)
	}
	if again, _ := fsm.AppendResponse(nil, got); !bytes.Equal(again, b) {
		tb.Fatalf("response changed over the wire:\n%x\n%x", b, again)
	}
	return got
}

// Every kind of response a command can give keeps its meaning through
// JSON: the same outcome and record, and an Err that matches the same
// sentinel (and typed error, with its record).
func TestResponseErrSurvivesJSON(t *testing.T) {
	x := seeded(t)
	running := x.mustGet("e-run")
	done := x.mustGet("e-done")
	x.mustOK(fsm.SetLimits(5, 0))

	cases := []struct {
		name    string
		c       fsm.Command
		want    error // nil: success
		outcome store.Outcome
		record  *store.Record
	}{
		{"reserved", fsm.Reserve(key("new"), fp, execution("e-new", "n1")), nil, store.Reserved, nil},
		{"replay", fsm.Reserve(key("done"), fp, execution("e-x", "n1")), nil, store.Replay, &done},
		{"uncertain", fsm.Reserve(key("run"), fp, execution("e-x", "n1")), nil, store.Uncertain, &running},
		{"conflict outcome", fsm.Reserve(key("done"), "fp-b", execution("e-x", "n1")), nil, store.Conflict, &done},
		{"capacity", fsm.Reserve(key("full"), fp, execution("e-full", "n1")), store.ErrCapacity, 0, nil},
		{"not found", fsm.Release("e-nope", true), store.ErrNotFound, 0, nil},
		{"invalid state", fsm.Complete(key("done"), fp, completed("e-done", `2`, t0)), store.ErrInvalidState, 0, &done},
		{"conflict error", fsm.Complete(key("run"), "fp-b", completed("e-run", `2`, t0)), store.ErrConflict, 0, &running},
		{"invalid", fsm.Cancel("e-run", completed("e-run", `2`, t0)), store.ErrInvalid, 0, nil},
		{"invalid capacity", fsm.SetLimits(0, 0), store.ErrInvalid, 0, nil},
		{"count", fsm.Interrupt("n1"), nil, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := x.apply(tc.c)
			w := overTheWire(t, r)
			bin := overBinary(t, r)
			for side, resp := range map[string]fsm.Response{"leader": r, "follower": w, "binary": bin} {
				err := resp.Err()
				if tc.want == nil && err != nil {
					t.Fatalf("%s: unexpected error %v", side, err)
				}
				if tc.want != nil && !errors.Is(err, tc.want) {
					t.Fatalf("%s: Err() = %v, want %v", side, err, tc.want)
				}
				if store.CodeOf(err) != store.CodeOf(tc.want) {
					t.Fatalf("%s: code %q, want %q", side, store.CodeOf(err), store.CodeOf(tc.want))
				}
				if resp.Outcome != tc.outcome {
					t.Fatalf("%s: outcome %v, want %v", side, resp.Outcome, tc.outcome)
				}
				if tc.record != nil && !sameRecord(t, resp.Record, *tc.record) {
					t.Fatalf("%s: record %+v, want %+v", side, resp.Record, *tc.record)
				}
			}
			if r.Outcome == store.Reserved && (w.Record.Seq != x.index || w.Record.ExecutionID != "e-new" ||
				bin.Record.Seq != x.index || bin.Record.ExecutionID != "e-new") {
				t.Fatalf("reserved record over the wire: %+v, binary %+v", w.Record, bin.Record)
			}
			if tc.c.Type == fsm.TypeInterrupt && (r.Count != 2 || w.Count != 2 || bin.Count != 2) {
				t.Fatalf("count %d over the wire %d, binary %d, want 2 (e-run and e-new)", r.Count, w.Count, bin.Count)
			}
		})
	}
}

func TestResponseTypedErrorsKeepTheirRecord(t *testing.T) {
	x := seeded(t)
	running := x.mustGet("e-run")

	w := overTheWire(t, x.apply(fsm.Complete(key("run"), fp, completed("e-other", `1`, t0.Add(time.Second)))))
	var se *store.StateError
	if !errors.As(w.Err(), &se) {
		t.Fatalf("Err() = %T %v, want *store.StateError", w.Err(), w.Err())
	}
	if se.Op != "complete" || !sameRecord(t, se.Record, running) {
		t.Fatalf("state error %+v, want op complete with %+v", se, running)
	}
	if f := se.Fields(); f["execution_id"] != "e-run" || f["status"] != store.StatusRunning {
		t.Fatalf("fields %v", f)
	}

	w = overTheWire(t, x.apply(fsm.Complete(key("run"), "fp-b", completed("e-run", `1`, t0.Add(time.Second)))))
	var ce *store.ConflictError
	if !errors.As(w.Err(), &ce) || !sameRecord(t, ce.Record, running) {
		t.Fatalf("Err() = %v, want *store.ConflictError with the record", w.Err())
	}
}

// Every field of a Response comes back from its binary form as it went,
// a quota error's and a capacity error's fields too, with times in other
// zones; and the JSON form agrees with it.
func TestResponseBinaryForm(t *testing.T) {
	east := time.FixedZone("", 5*3600+1800)
	cases := []fsm.Response{
		{},
		{Outcome: store.Replay, Record: store.Record{
			ExecutionID: "e-1", Key: store.Key{Principal: "p", Session: "s", RequestID: "r"}, Tool: "echo", Fingerprint: "sha256:ab",
			Status: store.StatusFailed, Data: json.RawMessage(`{"a":[1,2]}`), Error: json.RawMessage(`{"code":"X","message":"m"}`),
			NodeID: "n2", StartedAt: time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC),
			FinishedAt: time.Date(2026, 12, 2, 15, 30, 1, 5, east), Resolved: true, ResolvedBy: "probe", Seq: 1<<40 + 7,
		}},
		{Outcome: store.Replay, Record: store.Record{ExecutionID: "e-3", Status: store.StatusCompleted, Data: json.RawMessage(`1`), Resolved: true}},
		{Outcome: store.Awaiting, Record: store.Record{ExecutionID: "e-4", Status: store.StatusAwaitingApproval,
			Approval: &store.ApprovalGate{Approvers: []string{"bob"}, ExpiresAt: time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)}}},
		{Code: store.CodeInvalidState, Op: "approve", Record: store.Record{ExecutionID: "e-5", Status: store.StatusDenied,
			Approval: &store.ApprovalGate{ExpiresAt: time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)},
			Decision: &store.DecisionRecord{Status: store.StatusDenied, By: "bob", Reason: "no", At: time.Date(2026, 12, 2, 10, 1, 0, 0, time.UTC)}}},
		{Code: store.CodeCapacity, Principal: "bob", Quota: 3, Bytes: 1 << 33},
		{Code: store.CodeCapacity, Resource: "bytes", Limit: 1 << 30},
		{Code: store.CodeInvalidState, Op: "complete", Record: store.Record{ExecutionID: "e-2", Status: store.StatusRunning}},
		{Code: store.CodeInvalidRequest, Message: "capacity must be positive"},
		{Count: 12345},
		{Outcome: store.Outcome(-3), Count: -1, Quota: -2, Bytes: -3, Limit: -4},
	}
	for i, r := range cases {
		got := overBinary(t, r)
		if !bytes.Equal(mustJSON(t, got), mustJSON(t, r)) {
			t.Errorf("case %d: %s came back as %s", i, mustJSON(t, r), mustJSON(t, got))
		}
		if !got.Record.StartedAt.Equal(r.Record.StartedAt) || !got.Record.FinishedAt.Equal(r.Record.FinishedAt) {
			t.Errorf("case %d: times %v %v, want %v %v", i, got.Record.StartedAt, got.Record.FinishedAt, r.Record.StartedAt, r.Record.FinishedAt)
		}
		if got.Outcome != r.Outcome || got.Count != r.Count || got.Quota != r.Quota || got.Bytes != r.Bytes || got.Limit != r.Limit {
			t.Errorf("case %d: %+v, want %+v", i, got, r)
		}
	}
}

// A binary Response that is cut short, has bytes after it, an unknown tag
// or a payload that is not JSON is refused, with an error.
func TestDecodeResponseRefusesMalformed(t *testing.T) {
	good, err := fsm.AppendResponse(nil, fsm.Response{Outcome: store.Replay, Record: store.Record{ExecutionID: "e-1", Data: json.RawMessage(`{"x":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{nil, {}, {2}, good[:len(good)-1], append(append([]byte(nil), good...), 0)}
	notJSON := bytes.Replace(good, []byte(`{"x":1}`), []byte(`{"x":1,`), 1)
	bad = append(bad, notJSON)
	for _, b := range bad {
		if r, err := fsm.DecodeResponse(b); err == nil {
			t.Errorf("DecodeResponse(%x) = %+v, want an error", b, r)
		}
	}
	if _, err := fsm.AppendResponse(nil, fsm.Response{Record: store.Record{StartedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}); err == nil {
		t.Error("AppendResponse of a time past year 9999: no error")
	}
}

func TestResponseErrOfUnknownCodeIsInvalid(t *testing.T) {
	var r fsm.Response
	if err := json.Unmarshal([]byte(`{"code":"FROM_THE_FUTURE","message":"later"}`), &r); err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "FROM_THE_FUTURE: later") {
		t.Fatalf("unknown code: %v, want ErrInvalid naming it", err)
	}
	if err := (fsm.Response{}).Err(); err != nil {
		t.Fatalf("zero response: %v", err)
	}
}
