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
// follower forwarded the command: an error travels as its SPEC code
// (store.Code) with its fields (the record, the operation, the principal
// and quota, a message), and Response.Err rebuilds the same store error on
// any node. Its JSON still reads, and still writes for older nodes, the
// error tokens of builds before the SPEC codes, so nodes of two builds
// understand each other through a rolling upgrade.
package fsm
