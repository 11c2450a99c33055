package store

import (
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestHeldRecordStringsShareOneAllocation pins packStrings where records
// enter a State (a reservation, a restore): the held record's seven
// strings lie end to end in one allocation, none of them the caller's
// (which would keep a decoded command or snapshot alive), and the index
// maps key on the held strings.
func TestHeldRecordStringsShareOneAllocation(t *testing.T) {
	// Built at run time, so that no two of them share static data.
	str := func(s string) string { return strings.Clone(s) }
	key := Key{Principal: str("alice"), Session: str("s1"), RequestID: str("req-1")}
	exec := Execution{ID: str("exec-1"), Tool: str("create_order"), NodeID: str("node1"), StartedAt: time.Unix(1, 0).UTC()}
	fp := str("fingerprint")
	inputs := []string{exec.ID, key.Principal, key.Session, key.RequestID, exec.Tool, fp, exec.NodeID}

	s := NewState(10)
	if _, err := s.Reserve(key, fp, exec, 1); err != nil {
		t.Fatal(err)
	}
	// A snapshot's records, decoded one string at a time.
	snap := s.Records()
	for i := range snap {
		r := &snap[i]
		r.ExecutionID, r.Key, r.Tool, r.Fingerprint, r.NodeID = str(r.ExecutionID), Key{str(r.Key.Principal), str(r.Key.Session), str(r.Key.RequestID)}, str(r.Tool), str(r.Fingerprint), str(r.NodeID)
	}
	restored := NewState(10)
	if err := restored.Restore(snap, s.LastSeq()); err != nil {
		t.Fatal(err)
	}
	fields := func(r Record) []string {
		return []string{r.ExecutionID, r.Key.Principal, r.Key.Session, r.Key.RequestID, r.Tool, r.Fingerprint, r.NodeID}
	}
	for _, c := range []struct {
		name   string
		s      *State
		inputs []string
	}{{"reserved", s, inputs}, {"restored", restored, fields(snap[0])}} {
		inputs := c.inputs
		r := c.s.byKey[key]
		held := fields(*r)
		for i, h := range held {
			if h != inputs[i] {
				t.Fatalf("%s: field %d = %q, want %q", c.name, i, h, inputs[i])
			}
			if unsafe.StringData(h) == unsafe.StringData(inputs[i]) {
				t.Errorf("%s: field %d (%q) is the caller's string, not a copy", c.name, i, h)
			}
			if i > 0 && unsafe.StringData(h) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(held[i-1])), len(held[i-1]))) {
				t.Errorf("%s: field %d (%q) does not follow field %d in one allocation", c.name, i, h, i-1)
			}
		}
		for k := range c.s.byKey {
			if unsafe.StringData(k.RequestID) != unsafe.StringData(r.Key.RequestID) {
				t.Errorf("%s: byKey keys on a string other than the held record's", c.name)
			}
		}
		for id := range c.s.byID {
			if unsafe.StringData(id) != unsafe.StringData(r.ExecutionID) {
				t.Errorf("%s: byID keys on a string other than the held record's", c.name)
			}
		}
	}
}
