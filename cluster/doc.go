// Package cluster runs one Carmy node of a Raft cluster: hashicorp/raft
// with raft-boltdb (log and stable store, fsync on) and a file snapshot
// store over TCP; memberlist for discovery and failure detection; a
// batching forwarder that carries followers' commands to the leader; join
// and removal; and Store, the Raft-backed store.Store.
//
// Every write goes through Node.Apply: on the leader it is raft.Apply, on
// a follower it is forwarded. Concurrent callers share Raft rounds (many
// goroutines in raft.Apply at once let Raft group entries per fsync), and
// concurrent forwards share requests (one HTTP request carries a batch).
//
// Uncertainty is explicit: a write whose commit cannot be confirmed
// (leadership lost mid-commit, a forward that timed out after it was sent)
// returns store.ErrCommitUnknown, never a guess.
package cluster
