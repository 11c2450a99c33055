package store

import "strings"

// packStrings lays the strings a record keeps for as long as it is held
// (its identity, execution id, tool, fingerprint and node id) end to end
// in one allocation, each then a substring of it, and so no longer the
// strings of the command or snapshot they were decoded from.
//
// A State holds up to its capacity of records, and the garbage collector
// visits every object they hold on every cycle: one allocation for these
// seven strings instead of seven (with execution ids mapped straight to
// records) makes a held record four heap objects, not nine, and its
// memory smaller by each small allocation's rounding up to its size class
// (fsm's BenchmarkMemoryPerRecord measures both). The index maps key on
// the packed strings (insert takes them from the record), so nothing
// keeps the decoded ones alive.
func (r *Record) packStrings() {
	fields := [...]*string{&r.ExecutionID, &r.Key.Principal, &r.Key.Session, &r.Key.RequestID, &r.Tool, &r.Fingerprint, &r.NodeID}
	n := 0
	for _, f := range fields {
		n += len(*f)
	}
	var b strings.Builder
	b.Grow(n)
	for _, f := range fields {
		b.WriteString(*f)
	}
	all, at := b.String(), 0
	for _, f := range fields {
		*f = all[at : at+len(*f)]
		at += len(*f)
	}
}
