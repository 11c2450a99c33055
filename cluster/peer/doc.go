// Package peer is the node-to-node HTTP protocol of a Carmy cluster: what
// one node asks of another over HTTP, beside Raft's own connections and
// gossip. It holds the paths, the headers, the bodies, the Client a node
// calls its peers with, and Handler, which serves a Server: the cluster
// package's Node implements Server (cluster/peer_server.go) and keeps the
// logic (applying forwarded commands, joins, read indexes); this package
// knows only the protocol. It imports no cluster, engine or api.
//
// # Outcomes
//
// Whatever carries a node-to-node call (a peer HTTP answer, a forward
// stream's frame; package forward imports this one), it speaks of its
// outcome in one vocabulary (outcome.go): Error, an error as it travels
// between nodes (an error code of docs/errors.md, or a state of the
// attempt: not the leader, outcome unknown), rebuilt on the receiving
// node as the same store error (Error.Err), so that errors.Is works on
// every node alike; Result, the outcome of one forwarded command; the
// outcomes of an attempt that are no outcome of the contract
// (ErrNotLeader, ErrNotSent, ErrRefused); and MaxCommandBytes, the bound
// on one command on every node. An error without a code (or a state)
// carries none.
//
// # Who calls what
//
//   - A follower opens a forward stream to the leader (PathStream: an
//     HTTP request upgraded to StreamProtocol, Client.DialStream as the
//     forward.Dialer); every command a follower writes reaches the leader
//     this way, in package forward's frames.
//   - A follower asks the leader for its read index before a
//     linearizable read (PathReadIndex, Client.ReadIndex).
//   - A node joining the cluster, or a member whose address changed, asks
//     a member to add it (PathJoin, Client.Join); a node asked to add or
//     remove a member (PathRemove, Client.Remove) that does not lead
//     passes the request on to the leader the same way.
//   - A node founding a cluster only if none exists reads the other
//     addresses' state first (PathState, Client.State); so do tools and
//     tests that check replicas converge.
//   - A follower that finds the leader silent asks the other voters for
//     their log positions, then has them check the silence in order
//     (PathSilence, Client.Silence).
//
// # Authentication
//
// Only cluster members may call (Guard, in front of Handler), recognised
// by what they hold, never by their address: with node TLS, mutual TLS
// under tlsmux.NodeServerName with a certificate of the cluster CA that
// carries the node role; with a cluster key, the key in KeyHeader; both
// when both are set, and nobody when neither is. A refused caller is
// answered 403 (Error with code FORBIDDEN) and logged through
// nodeauth.Refusals; a wrong key is also reported through authfail, so
// the API server in front rate-limits a guesser's address. NodeIDHeader
// names the caller for the audit log (a claim, not a credential), and
// ActorHeader carries who asked for a join or removal a node passes on.
//
// # Timeouts and bounds
//
// A Client dials within DialTimeout, finishes node TLS's handshake within
// TLSHandshakeTimeout and keeps idle connections IdleConnTimeout; each
// call is bounded by its context, which the caller sets (a follower's
// read index and joins by the node's LeaderWait, a silence check by a
// fraction of Raft's heartbeat timeout). A request body is at most
// MaxRequestBytes and an answer MaxAnswerBytes. An error that matches
// ErrNotSent never reached the other node (nothing of it was
// applied); one that matches ErrRefused was refused as a member's
// call and will be refused again.
//
// # Compatibility
//
// Every request and answer names the node protocol version
// (ProtocolHeader, nodeauth.ProtocolVersion), and a node refuses a peer of
// another version, both ways (Handler, CheckAnswer); only GET PathState may
// go without one. The paths on the wire begin with /internal/, as they
// always have (the code called these endpoints "internal" before this
// package named them "peer"): a path, a header or a body changes only with
// the protocol version, so that nodes of builds either side of a
// refactoring keep talking. Nothing older than ProtocolVersion 1 is read,
// so the package has no compat.go.
package peer
