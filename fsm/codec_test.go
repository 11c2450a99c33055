package fsm_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// checkAllSet fails when a field of v (a struct, followed through
// pointers and embedded structs) is zero: the samples below must set every
// field, so that a field added to a command's payload and forgotten by the
// binary codec fails TestBinaryCodecEveryField.
func checkAllSet(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			t.Errorf("%s is nil in the sample", path)
			return
		}
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[time.Time]() {
		for i := range v.NumField() {
			checkAllSet(t, path+"."+v.Type().Field(i).Name, v.Field(i))
		}
		return
	}
	if v.IsZero() {
		t.Errorf("%s is zero in the sample: set it here, and write it in the binary codec", path)
	}
}

// TestBinaryCodecEveryField: every field of every payload, set to a value
// other than zero, comes back from Encode and Decode unchanged.
func TestBinaryCodecEveryField(t *testing.T) {
	plus2 := time.FixedZone("", 2*3600)
	k := store.Key{Principal: "alice", Session: "s1", RequestID: "r1"}
	res := store.Result{ExecutionID: "e1", Status: store.StatusCompleted, Data: json.RawMessage(`{"a":"<&>"}`),
		Error: json.RawMessage(`{"code":"X","message":"m"}`), FinishedAt: time.Date(2026, 12, 2, 3, 4, 5, 6, plus2), ByteQuota: 77}
	samples := map[fsm.Type]fsm.Command{
		fsm.TypeReserve: fsm.Reserve(k, "fp", store.Execution{ID: "e1", Tool: "t", NodeID: "n1", StartedAt: t0,
			Quota: 3, ByteQuota: 1 << 40, Headroom: 9, DedupeWindow: time.Hour, RetryUncertain: true,
			Approval: &store.ApprovalGate{Approvers: []string{"bob", "carol"}, ExpiresAt: t0.Add(time.Hour),
				Arguments: json.RawMessage(`{"amount":5}`), Metadata: json.RawMessage(`{"m":1}`)}}),
		fsm.TypeDecide: fsm.Decide("e1", store.Decision{Kind: store.DecisionApprove, Actor: "bob", Reason: "ok",
			At: time.Date(2026, 12, 2, 3, 4, 5, 6, plus2), NodeID: "n2"}),
		fsm.TypeComplete:    fsm.Complete(k, "fp", res),
		fsm.TypeCancel:      fsm.Cancel("e1", res),
		fsm.TypeResolve:     fsm.Resolve("e1", store.Resolution{Result: res, AllowRunning: true, By: "alice"}),
		fsm.TypeRelease:     fsm.Release("e1", true),
		fsm.TypeInterrupt:   fsm.Interrupt("n1"),
		fsm.TypeExpire:      fsm.Expire(t0),
		fsm.TypeCapacity:    fsm.SetLimits(5, 6),
		fsm.TypeNode:        fsm.SetNode(fsm.NodeInfo{ID: "n1", RaftAddr: "r", HTTPAddr: "h", GossipAddr: "g"}),
		fsm.TypeNodeRemoved: fsm.RemoveNode("n2"),
	}
	for name, c := range everyCommand() {
		if _, ok := samples[c.Type]; !ok {
			t.Fatalf("no sample of %s (%s)", c.Type, name)
		}
	}
	for typ, c := range samples {
		payload := reflect.ValueOf(payloadOnly(c))
		for i := range payload.NumField() {
			if f := payload.Field(i); !f.IsZero() {
				checkAllSet(t, string(typ)+"."+payload.Type().Field(i).Name, f)
			}
		}
		b := mustEncode(t, c)
		got, err := fsm.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if !reflect.DeepEqual(normalize(t, got), normalize(t, c)) {
			t.Errorf("%s: decoded\n%+v\nwant\n%+v", typ, got, c)
		}
		if pt, ok := fsm.PeekType(b); !ok || pt != typ {
			t.Errorf("%s: PeekType = %q, %v", typ, pt, ok)
		}
	}
}

func TestBinaryDecodeRefusesMalformed(t *testing.T) {
	good := mustEncode(t, fsm.Complete(key("r1"), fp, completed("e1", `{"a":1}`, t0)))
	// hdr is a command's tag, type and an empty proposer stamp.
	hdr := func(typ byte) []byte { return append([]byte{0xC3, typ}, append(binaryTime(0, 0, 0), 0)...) }
	cases := map[string][]byte{
		"tag only":                               {0xC3},
		"version 1":                              append([]byte{0xC1}, good[1:]...),
		"unknown type":                           hdr(99),
		"type zero":                              hdr(0),
		"truncated":                              good[:len(good)-1],
		"trailing":                               append(append([]byte{}, good...), 0),
		"no payload":                             hdr(6),
		"bad bool":                               append(mustEncode(t, fsm.Release("e1", true))[:len(mustEncode(t, fsm.Release("e1", true)))-1], 7),
		"year 10000":                             append(hdr(7), binaryTime(253402300800, 0, 0)...),
		"nanos too large":                        append(hdr(7), binaryTime(0, 1e9, 0)...),
		"offset a day":                           append(hdr(7), binaryTime(0, 0, 86400)...),
		"stamp year 10000":                       append([]byte{0xC3, 7}, binaryTime(253402300800, 0, 0)...),
		"node without id":                        append(hdr(9), 0, 0, 0, 0),
		"admin without node":                     append(hdr(11), 1, 'j', 0),
		"empty":                                  nil,
		"newer tag":                              append([]byte{0xC4}, good[1:]...),
		"JSON of builds before the binary codec": []byte(`{"v":1,"type":"interrupt","node_id":"n1"}`),
		"batch":                                  {0xB1, 1, 2, 0xC3, 6},
	}
	for name, b := range cases {
		if c, err := fsm.Decode(b); !errors.Is(err, fsm.ErrMalformed) || c.Type != "" {
			t.Errorf("%s: Decode = %+v, %v; want ErrMalformed", name, c, err)
		}
	}
	if _, err := fsm.Encode(fsm.Command{Type: "mystery"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Encode of an unknown type: %v", err)
	}
	if _, err := fsm.Encode(fsm.Command{Type: fsm.TypeReserve}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Encode of a reserve without payload: %v", err)
	}
}

func binaryTime(sec int64, nsec uint64, off int64) []byte {
	var b []byte
	b = appendVarint(b, sec)
	b = appendUvarint(b, nsec)
	return appendVarint(b, off)
}

func appendUvarint(b []byte, x uint64) []byte {
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}

func appendVarint(b []byte, x int64) []byte {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return appendUvarint(b, ux)
}
