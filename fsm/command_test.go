package fsm_test

import (
	"errors"
	"testing"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// everyCommand returns one command of each constructor.
func everyCommand() map[string]fsm.Command {
	return map[string]fsm.Command{
		"reserve":  fsm.Reserve(key("r1"), fp, execution("e1", "n1")),
		"complete": fsm.Complete(key("r1"), fp, completed("e1", `{"order_id":1,"tags":["a","<b>"]}`, t0.Add(time.Second))),
		"complete failed": fsm.Complete(key("r1"), fp,
			failedWith("e1", store.StatusTimedOut, "TIMEOUT", t0.Add(1500*time.Millisecond))),
		"cancel": fsm.Cancel("e1", cancelled("e1", t0.Add(time.Minute))),
		"resolve": fsm.Resolve("e1", store.Resolution{
			Result:       completed("e1", `"done"`, t0.Add(time.Hour)),
			AllowRunning: true,
		}),
		"release":         fsm.Release("e1", false),
		"release running": fsm.Release("e1", true),
		"interrupt":       fsm.Interrupt("n1"),
		"expire":          fsm.Expire(t0.Add(-24 * time.Hour)),
		"capacity":        fsm.SetLimits(42, 0),
		"node": fsm.SetNode(fsm.NodeInfo{
			ID: "n1", RaftAddr: "10.0.0.1:7000", HTTPAddr: "10.0.0.1:8080", GossipAddr: "10.0.0.1:7946",
		}),
		"node removed": fsm.RemoveNode("n1"),
		"reserve with quota": fsm.Reserve(key("r1"), fp, store.Execution{
			ID: "e1", Tool: "create_order", NodeID: "n1", StartedAt: t0, Quota: 7,
		}),
		"reserve gated": fsm.Reserve(key("r1"), fp, store.Execution{
			ID: "e1", Tool: "pay", NodeID: "n1", StartedAt: t0,
			Approval: &store.ApprovalGate{Approvers: []string{"bob"}, ExpiresAt: t0.Add(time.Hour)},
		}),
		"reserve gated admin only": fsm.Reserve(key("r1"), fp, store.Execution{
			ID: "e1", Tool: "pay", NodeID: "n1", StartedAt: t0, RetryUncertain: true,
			Approval: &store.ApprovalGate{ExpiresAt: t0.Add(time.Hour)},
		}),
		"decide": fsm.Decide("e1", store.Decision{Kind: store.DecisionDeny, Actor: "bob", Reason: "no", At: t0.Add(time.Minute)}),
	}
}

func TestCommandRoundTrip(t *testing.T) {
	for name, c := range everyCommand() {
		t.Run(name, func(t *testing.T) {
			b := mustEncode(t, c)
			got, err := fsm.Decode(b)
			if err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if !sameCommand(t, got, c) {
				t.Fatalf("round trip changed the command:\n got %+v\nwant %+v", got, c)
			}
			if again := mustEncode(t, got); string(again) != string(b) {
				t.Fatalf("encoding is not stable:\n%s\n%s", again, b)
			}
		})
	}
}

func TestCommandConstructorsSetTheirType(t *testing.T) {
	want := map[string]fsm.Type{
		"reserve": fsm.TypeReserve, "complete": fsm.TypeComplete, "complete failed": fsm.TypeComplete,
		"cancel": fsm.TypeCancel, "resolve": fsm.TypeResolve, "release": fsm.TypeRelease,
		"release running": fsm.TypeRelease, "interrupt": fsm.TypeInterrupt, "expire": fsm.TypeExpire,
		"capacity": fsm.TypeCapacity, "node": fsm.TypeNode, "node removed": fsm.TypeNodeRemoved,
		"reserve with quota": fsm.TypeReserve, "reserve gated": fsm.TypeReserve,
		"reserve gated admin only": fsm.TypeReserve, "decide": fsm.TypeDecide,
	}
	for name, c := range everyCommand() {
		if c.Type != want[name] {
			t.Errorf("%s: type %q, want %q", name, c.Type, want[name])
		}
	}
}

// Zero values come back as the same zero values: a capacity of 0 (refused
// when applied, not lost), an expire with no cutoff, a release without
// allow_running.
func TestCommandRoundTripOfZeroValues(t *testing.T) {
	for _, c := range []fsm.Command{
		fsm.SetLimits(0, 0),
		fsm.SetLimits(-3, 0),
		fsm.Expire(time.Time{}),
		fsm.Release("", false),
		fsm.Interrupt(""),
		fsm.RemoveNode(""),
		fsm.Reserve(store.Key{}, "", store.Execution{}),
	} {
		got, err := fsm.Decode(mustEncode(t, c))
		if err != nil {
			t.Fatalf("%s: %v", c.Type, err)
		}
		if !sameCommand(t, got, c) {
			t.Fatalf("%s: got %+v, want %+v", c.Type, got, c)
		}
	}
}

func TestCommandEncodingKeepsTimesExactly(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("CET", 3600))
	c := fsm.Complete(key("r"), fp, completed("e", `1`, at))
	got, err := fsm.Decode(mustEncode(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Result.FinishedAt.Equal(at) {
		t.Fatalf("finished_at %v, want %v", got.Result.FinishedAt, at)
	}
	if _, off := got.Result.FinishedAt.Zone(); off != 3600 {
		t.Fatalf("offset %d, want 3600", off)
	}
}

// A command that cannot be written to the log is refused before it is
// proposed, as an invalid argument.
func TestEncodeRefusesUnencodable(t *testing.T) {
	for name, c := range map[string]fsm.Command{
		"invalid data":   fsm.Complete(key("r1"), fp, completed("e1", `{"a":`, t0)),
		"invalid error":  fsm.Cancel("e1", store.Result{ExecutionID: "e1", Status: store.StatusCancelled, Error: []byte(`{x}`), FinishedAt: t0}),
		"year past 9999": fsm.Expire(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)),
	} {
		b, err := fsm.Encode(c)
		if !errors.Is(err, store.ErrInvalid) || b != nil {
			t.Errorf("%s: Encode = %q, %v; want ErrInvalid", name, b, err)
		}
	}
}
