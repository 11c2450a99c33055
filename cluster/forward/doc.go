// Package forward carries a follower's commands to the leader: the
// Forwarder, its forward streams, and the frames they carry.
//
// A Forwarder gathers concurrent commands into batches (up to MaxBatch
// commands and MaxBatchBytes of them; a larger command goes alone) and
// sends them over one kept-alive stream per leader address, which it
// opens through a Dialer (package peer's Client: the upgrade of a peer
// HTTP call, with its key, node TLS and protocol version). Up to MaxInFlight batches are in flight on a stream (fewer
// when they are large: one slot per started MiB), and the leader answers
// them in order, each command with its own result (a peer.Result).
//
// Its contract on outcomes: a batch that was not written whole was never
// read, so its commands fail with peer.ErrNotSent (nothing applied, ask
// again); a leader that refuses this node gives peer.ErrRefused; a stream
// that breaks, answers what cannot be read, or stays silent past a
// batch's deadline leaves every batch it had not answered of unknown
// outcome (an error that matches store.ErrCommitUnknown and nothing
// else). The stream is the only way a command reaches the leader from
// another node: there is no other form to fall back on, and no compat.go.
//
// The frame format (frame.go) is shared with the leader's end, which the
// cluster package serves (ReadFrame, DecodeBatch, AppendAnswer).
package forward
