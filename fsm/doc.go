// Package fsm is Carmy's replicated state machine: the typed commands that
// travel through the Raft log, their deterministic application to a
// store.State, and the snapshot format.
//
// Every command carries everything its application needs: the proposer
// stamps execution ids, node ids and times into it, and Apply reads no
// clock, no randomness and no network. So every replica that applies the
// same log reaches the same State, and a snapshot restores it exactly.
//
// Application outcomes (reserved, replay, conflict, uncertain, capacity,
// invalid state) are returned as a Response value, not as Raft errors: a
// command that is refused is still a committed entry, applied the same way
// everywhere. A Response is plain data, since it crosses the network when a
// follower forwarded the command: an error travels as its error code
// (store.Code) with its fields (the record, the operation, the principal
// and quota, a message), and Response.Err rebuilds the same store error on
// any node.
//
// Every form this package writes (a log entry, a command, a snapshot, a
// Response on the wire) begins with a byte that names it and its version
// (forms.go), and a reader refuses a form or version it does not know
// rather than misread it: an entry it cannot read is applied as a
// refusal that changes nothing, a snapshot of another version is not
// restored. No older form is read: there has been no release, so no build
// needs one. A reader kept for an older form goes in compat.go, and is
// deleted by the rule of docs/design.md ("Compatibility"); there is none
// today.
package fsm
