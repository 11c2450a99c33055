package fsm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/carmyhq/carmy/store"
)

// The approval parts of the binary forms (docs/policy.md#approval-gates).
// Each is written only when there is one, at the end of what holds it (a
// reservation, a snapshot's record block, a response), so that the forms
// without them read as before gates existed.
//
//	gate      the count of approvers (uvarint), each a string; expires_at;
//	          arguments and metadata (JSON payloads, as a record's data)
//	decision  0 (none), or 1 then status, by, reason (strings) and at

// gate writes an approval gate.
func (e *encoder) gate(g *store.ApprovalGate) {
	e.uint(uint64(len(g.Approvers)))
	for _, a := range g.Approvers {
		e.str(a)
	}
	e.time(g.ExpiresAt)
	e.raw(g.Arguments)
	e.raw(g.Metadata)
}

// gate reads an approval gate.
func (d *decoder) gate() *store.ApprovalGate {
	n := d.uint()
	if n > store.MaxApprovers {
		d.fail(fmt.Errorf("%d approvers", n))
		return nil
	}
	g := &store.ApprovalGate{}
	for ; n > 0 && d.err == nil; n-- {
		g.Approvers = append(g.Approvers, d.str())
	}
	g.ExpiresAt = d.time()
	g.Arguments, g.Metadata = d.json(), d.json()
	for _, p := range [][]byte{g.Arguments, g.Metadata} {
		if len(p) > 0 && !json.Valid(p) {
			d.fail(errors.New("an approval gate's arguments or metadata are not valid JSON"))
		}
	}
	return g
}

// approval writes a gated record's gate and decision; nothing for a
// record without a gate.
func (e *encoder) approval(r *store.Record) {
	if r.Approval == nil {
		return
	}
	e.gate(r.Approval)
	if r.Decision == nil {
		e.uint(0)
		return
	}
	e.uint(1)
	e.str(string(r.Decision.Status))
	e.str(r.Decision.By)
	e.str(r.Decision.Reason)
	e.time(r.Decision.At)
}

// approval reads what encoder.approval wrote into r, when anything is
// left of the block (a record without a gate has nothing there).
func (d *decoder) approval(r *store.Record) {
	if d.err != nil || len(d.b) == 0 {
		return
	}
	r.Approval = d.gate()
	switch d.uint() {
	case 0:
	case 1:
		r.Decision = &store.DecisionRecord{Status: store.Status(d.str()), By: d.str(), Reason: d.str(), At: d.time()}
	default:
		d.fail(errors.New("a record's decision marker is neither 0 nor 1"))
	}
}
