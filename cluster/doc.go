// Package cluster runs one Carmy node of a Raft cluster: hashicorp/raft
// with raft-boltdb (log and stable store, fsync on) and a file snapshot
// store over TCP; memberlist for discovery and failure detection; a
// batching forwarder that carries followers' commands to the leader; join
// and removal; and Store, the Raft-backed store.Store.
//
// Every write goes through Node.Apply: on the leader it goes to the
// proposer, which commits in rounds (while one round is in Raft, new
// commands queue and go together as the next); on a follower it is
// forwarded. Concurrent forwards share requests: one HTTP request carries a
// batch of up to 512 commands and 4 MiB of them (a larger command goes
// alone), and the leader's body limit holds the largest batch a forwarder
// builds, so a batch is never refused for its size. Each command gets its
// own result back; a completion's comes without the result it carried (the
// follower has it, and puts it back as the log holds it).
//
// Errors keep one vocabulary end to end. An outcome of the contract travels
// between nodes as its SPEC code (store.Code) and is rebuilt on the other
// side as the same store error, so errors.Is works on every node. Two
// states of one attempt are no outcome and travel apart: "not the leader"
// (nothing applied: ask the leader) and "outcome unknown". Uncertainty is
// explicit: a write whose commit cannot be confirmed (leadership lost
// mid-commit, a forward that timed out or was refused whole after it was
// sent) returns store.ErrCommitUnknown, which never also matches a refusal
// (store.ErrInvalid, store.ErrConflict, …), never a guess.
//
// The files follow the concepts: apply.go (the one way in), propose.go
// (rounds), forward.go (batches), wire.go (the node-to-node endpoints, their
// types, errors and size bounds), internal_server.go and internal_client.go
// (both ends of those calls), membership.go (join, removal, the member
// table's NodeInfo), store.go (store.Store).
//
// Nodes authenticate each other by a key or a certificate, never by their
// address: with node TLS (tls.go), mutual TLS with certificates of the
// cluster CA that carry the node role; otherwise the cluster key, carried
// by every internal HTTP call and proven on every Raft connection by a
// challenge-response handshake (raftauth.go). Gossip is encrypted under a
// key derived from the cluster key unless one is given (gossip.go).
// Refused peers are logged at a bounded rate (refusal.go), and every write
// through the internal endpoints is audited, one line per request
// (audit.go).
//
// The API names its own types (NodeInfo, Status, StateDigest); Config.Hooks
// lets tests wrap the node's network (HTTP dials, the Raft stream layer,
// the gossip transport) to inject faults without the package knowing of
// any fault layer.
package cluster
