// Package wire is the vocabulary the node-to-node calls share, whatever
// carries them (a peer HTTP answer, a forward stream's frame): Error,
// an error as it travels between nodes (an error code of docs/errors.md, or a state of the
// attempt: not the leader, outcome unknown), rebuilt on the receiving
// node as the same store error (Error.Err), so that errors.Is works on
// every node alike; Result, the outcome of one forwarded command; the
// outcomes of an attempt that are no outcome of the contract (ErrNotLeader,
// ErrNotSent, ErrRefused); and MaxCommandBytes, the bound on one command
// on every node.
//
// An error without a code (or a state) carries none: nothing older is
// read, so the package has no compat.go.
package wire
