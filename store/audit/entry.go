package audit

import (
	"strconv"
	"strings"
	"time"

	"github.com/carmyhq/carmy/internal/jsonscan"
)

// Kind names what an entry records.
type Kind string

// The kinds of entries. A decision about an execution is named after the
// status it leads to; an admin action after the action.
const (
	KindReserved    Kind = "reserved"
	KindCompleted   Kind = "completed"
	KindFailed      Kind = "failed"
	KindTimedOut    Kind = "timed_out"
	KindCancelled   Kind = "cancelled"
	KindInterrupted Kind = "interrupted"
	KindResolved    Kind = "resolved"
	KindReleased    Kind = "released"
	// KindApproved, KindDenied and KindExpired are the decisions on an
	// execution awaiting approval; an approved one goes on running.
	KindApproved Kind = "approved"
	KindDenied   Kind = "denied"
	KindExpired  Kind = "expired"
	KindJoin     Kind = "join"
	KindRemove   Kind = "remove"
	KindTransfer Kind = "leadership_transfer"
	// KindCheckpoint is the leader's signature of the head before it
	// (its Checkpoint member; sign.go).
	KindCheckpoint Kind = "checkpoint"
)

// Genesis is the PrevHash of the first entry: 64 zeros.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// Entry is one decision of the ledger. Its JSON members are exactly its
// fields; Time is written in UTC with time.RFC3339Nano.
type Entry struct {
	Seq         uint64    `json:"seq"`
	Time        time.Time `json:"time"`
	Kind        Kind      `json:"kind"`
	ExecutionID string    `json:"execution_id"`
	Principal   string    `json:"principal"`
	// Actor is who decided: a principal, "probe", or a node's id.
	Actor       string `json:"actor"`
	Tool        string `json:"tool"`
	Fingerprint string `json:"fingerprint"`
	// Status is the execution's status after the decision ("released"
	// for a released reservation; "" for an admin action).
	Status string `json:"status"`
	// Target is what an admin action acted on: a member's id ("" for a
	// decision about an execution).
	Target   string `json:"target"`
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
	// Checkpoint is the signed head of a KindCheckpoint entry, and the
	// only member an entry may lack: nil (absent) for every other kind.
	Checkpoint *Signed `json:"checkpoint,omitempty"`
}

// Draft is an entry before it takes its place in the chain: everything
// but Seq, PrevHash and Hash.
type Draft = Entry

// Canonical appends the RFC 8785 canonical JSON of e without its "hash"
// member: the bytes its Hash covers.
func (e *Entry) Canonical(dst []byte) []byte {
	b, _ := e.appendJSON(dst, false)
	return b
}

// Line appends the canonical JSON of the whole entry, "hash" included,
// and a newline: one line of an export.
func (e *Entry) Line(dst []byte) []byte {
	b, _ := e.appendJSON(dst, true)
	return append(b, '\n')
}

// appendJSON writes the members in RFC 8785's order (their names are
// ASCII, so sorted bytewise). Strings are written with RFC 8785's
// escaping; text that is not valid UTF-8 is first made valid (Clean), so
// an entry built by Clean always writes as it reads back. hashAt is where
// the "hash" member starts, or would start when withHash is false.
func (e *Entry) appendJSON(b []byte, withHash bool) (_ []byte, hashAt int) {
	str := func(name, v string) {
		b = append(b, name...)
		b = jsonscan.AppendString(b, v, jsonscan.Canonical)
	}
	str(`{"actor":`, e.Actor)
	if c := e.Checkpoint; c != nil {
		str(`,"checkpoint":{"hash":`, c.Hash)
		str(`,"key_id":`, c.KeyID)
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, c.Seq, 10)
		str(`,"signature":`, c.Signature)
		b = append(b, '}')
	}
	str(`,"execution_id":`, e.ExecutionID)
	str(`,"fingerprint":`, e.Fingerprint)
	hashAt = len(b)
	if withHash {
		str(`,"hash":`, e.Hash)
	}
	str(`,"kind":`, string(e.Kind))
	str(`,"prev_hash":`, e.PrevHash)
	str(`,"principal":`, e.Principal)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	str(`,"status":`, e.Status)
	str(`,"target":`, e.Target)
	b = append(appendTime(append(b, `,"time":"`...), e.Time), '"')
	str(`,"tool":`, e.Tool)
	return append(b, '}'), hashAt
}

// appendTime appends how an entry writes its time: UTC,
// time.RFC3339Nano. The text is digits and "-:.TZ", which JSON strings
// hold unescaped.
func appendTime(dst []byte, t time.Time) []byte { return t.UTC().AppendFormat(dst, time.RFC3339Nano) }

// ComputeHash returns the hash e must carry: hex SHA-256 of its PrevHash
// and its canonical JSON. scratch, when given, is reused for the bytes.
func (e *Entry) ComputeHash(scratch []byte) string {
	var c Chainer
	digits := c.hash(e.PrevHash, e.Canonical(scratch[:0]))
	return string(digits[:])
}

// Clean returns d with every string made valid UTF-8 (invalid bytes as
// U+FFFD) and its time in UTC, so that the entry writes as it reads back.
func Clean(d Draft) Draft {
	for _, s := range []*string{&d.ExecutionID, &d.Principal, &d.Actor, &d.Tool, &d.Fingerprint, &d.Status, &d.Target} {
		*s = strings.ToValidUTF8(*s, "\uFFFD")
	}
	d.Kind = Kind(strings.ToValidUTF8(string(d.Kind), "\uFFFD"))
	if c := d.Checkpoint; c != nil {
		s := *c
		for _, p := range []*string{&s.Hash, &s.KeyID, &s.Signature} {
			*p = strings.ToValidUTF8(*p, "\uFFFD")
		}
		d.Checkpoint = &s
	}
	d.Time = d.Time.UTC()
	return d
}

// Head is where a chain stands: the Seq and Hash of its last entry (0
// and Genesis for an empty chain), or of the checkpoint of a chain whose
// entries were all pruned.
type Head struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// Next links d after h: it returns the entry with Seq h.Seq+1, PrevHash
// h.Hash and its Hash computed, and the new head.
func (h Head) Next(d Draft, scratch []byte) (Entry, Head) {
	e := Clean(d)
	e.Seq = h.Seq + 1
	e.PrevHash = h.Hash
	e.Hash = e.ComputeHash(scratch)
	return e, Head{Seq: e.Seq, Hash: e.Hash}
}

// Start is the head of an empty chain.
var Start = Head{Seq: 0, Hash: Genesis}
