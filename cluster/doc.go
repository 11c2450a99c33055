// Package cluster runs one Carmy node of a Raft cluster: hashicorp/raft
// over the log storage of package raftlog (BoltDB, fsync on, the leader's
// writes queued beside the followers') and a file snapshot store, over a
// TCP transport whose connections package nodeauth authenticates;
// memberlist for discovery and failure detection; the forwarding of a
// follower's commands to the leader; join and removal; and Store, the
// Raft-backed store.Store.
//
// Every write goes through Node.Apply: on the leader it goes to the
// proposer, which commits in rounds (while one round is in Raft, new
// commands queue and go together as the next); on a follower it is
// forwarded. Concurrent forwards share batches of up to 512 commands and
// 4 MiB of them (a larger command goes alone), sent over one kept-alive
// forward stream per leader: a peer HTTP request upgraded to a
// stream of binary frames (package forward), with up to 32 batches in
// flight, which the leader answers in order. The stream is the only way a
// command reaches the leader from another node. Each command gets its own
// result back; a completion's comes without the result it carried (the
// follower has it, and puts it back as the log holds it).
//
// Errors keep one vocabulary end to end. An outcome of the contract travels
// between nodes as its error code (store.Code, docs/errors.md) and is rebuilt on the other
// side as the same store error, so errors.Is works on every node. Two
// states of one attempt are no outcome and travel apart: "not the leader"
// (nothing applied: ask the leader) and "outcome unknown". Uncertainty is
// explicit: a write whose commit cannot be confirmed (leadership lost
// mid-commit, a stream that broke or fell silent after the batch was
// sent) returns store.ErrCommitUnknown, which never also matches a refusal
// (store.ErrInvalid, store.ErrConflict, …), never a guess.
//
// The files follow the concepts: apply.go (the one way in), propose.go
// (rounds), stream_server.go (the leader's end of the forward streams;
// the follower's is package forward), forwarded.go (a forwarded batch
// through the leader, from either end), peer_server.go (what the node
// does when a peer calls it: the node-to-node HTTP protocol itself, its
// paths, bodies, client, authentication and version check, is package
// peer's, and so are the errors and results it carries), membership.go (join, removal, the member
// table's NodeInfo), silence.go (a crashed leader replaced in order),
// diskfull.go (a full disk; the log beneath Raft is package raftlog's),
// gossip.go (the memberlist member, over package gossip), metrics.go,
// audit.go, store.go (store.Store).
//
// Nodes authenticate each other by a key or a certificate, never by their
// address (package nodeauth): with node TLS, mutual TLS with certificates
// of the cluster CA that carry the node role; otherwise the cluster key,
// carried by every peer HTTP call and proven on every Raft connection
// by a challenge-response handshake. Every Raft connection names the node
// protocol version (nodeauth.ProtocolVersion) in its preamble and every
// peer call and answer in peer.ProtocolHeader; a peer of another version
// is refused, and the refusal logged with both versions. Gossip is
// encrypted under a key derived from the cluster key unless one is given
// (gossip.go). Refused peers are logged at a bounded rate, and every write
// through the peer endpoints is audited, one line per request
// (audit.go).
//
// Nothing older than node protocol version 1 is read (there has been no
// release before it), so the package has no compat.go.
//
// The API names its types: Status; NodeInfo, the member table's entry
// (an alias of fsm.NodeInfo); StateDigest (of cluster/peer's). Config.Hooks
// lets tests wrap the node's network (HTTP dials, the Raft stream layer,
// the gossip transport) and its durable log store to inject faults without
// the package knowing of any fault layer.
package cluster
