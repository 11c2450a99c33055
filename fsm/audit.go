package fsm

import (
	"time"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// What each applied command appends to the audit ledger (docs/audit.md):
// a decision that changed an execution, or an admin action. A command
// refused (a Response with a Code), a reservation answered with a replay,
// a conflict or uncertain, an expiry and the member table's changes
// append nothing. Every field comes from the command and the state, so
// every replica drafts the same entries.

// audit drafts the entry of c, applied with the successful r.
func (p *Processor) audit(c Command, r Response) {
	rec := r.Record
	d := audit.Draft{
		Time: c.At, Actor: c.Actor, ExecutionID: rec.ExecutionID, Principal: rec.Key.Principal,
		Tool: rec.Tool, Fingerprint: rec.Fingerprint, Status: string(rec.Status),
	}
	switch c.Type {
	case TypeReserve:
		if r.Outcome != store.Reserved {
			return
		}
		d.Kind, d.Actor = audit.KindReserved, rec.Key.Principal
		if d.Time.IsZero() {
			d.Time = c.Execution.StartedAt
		}
	case TypeComplete, TypeCancel:
		d.Kind = audit.Kind(rec.Status)
	case TypeResolve:
		d.Kind = audit.KindResolved
		if c.Resolution.By != "" {
			d.Actor = c.Resolution.By
		}
	case TypeRelease:
		d.Kind, d.Status = audit.KindReleased, string(audit.KindReleased)
	case TypeDecide:
		// Named after what the decision did: an approval or denial at or
		// after the gate's expiry is an expiry.
		d.Kind = decisionKind(rec.Status)
		if c.Decision.Actor != "" {
			d.Actor = c.Decision.Actor
		}
		if d.Time.IsZero() {
			d.Time = c.Decision.At
		}
	case TypeAdmin:
		d = audit.Draft{Time: c.At, Actor: c.Actor, Kind: audit.Kind(c.Action), Target: c.NodeID}
	case TypeAuditCheckpoint:
		s := *c.Checkpoint
		d = audit.Draft{Time: c.At, Actor: c.Actor, Kind: audit.KindCheckpoint, Checkpoint: &s}
	case TypeAuditPrune:
		p.prune = laterOf(p.prune, c.Cutoff)
		return
	default:
		return
	}
	p.drafts = append(p.drafts, d)
}

// decisionKind is the ledger's kind of a decision that left a record in
// status st.
func decisionKind(st store.Status) audit.Kind {
	switch st {
	case store.StatusRunning:
		return audit.KindApproved
	case store.StatusDenied:
		return audit.KindDenied
	}
	return audit.KindExpired
}

// auditInterrupted drafts an interrupted entry per record an interrupt
// command marked (in Seq order).
func (p *Processor) auditInterrupted(c Command, recs []store.Record) {
	for _, rec := range recs {
		p.drafts = append(p.drafts, audit.Draft{
			Time: c.At, Kind: audit.KindInterrupted, Actor: c.Actor, ExecutionID: rec.ExecutionID,
			Principal: rec.Key.Principal, Tool: rec.Tool, Fingerprint: rec.Fingerprint, Status: string(rec.Status),
		})
	}
}

// TakeDrafts returns the audit drafts of the commands applied since the
// last call, and the latest prune cutoff among them (zero: none), and
// forgets them.
func (p *Processor) TakeDrafts() ([]audit.Draft, time.Time) {
	d, cut := p.drafts, p.prune
	p.drafts, p.prune = nil, time.Time{}
	return d, cut
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
