// Package faultnet is a TEST-ONLY network fault layer: it lets a
// fault-injection harness cut traffic between specific cluster nodes (each
// in its own container with its own IP) for Raft, gossip and node-to-node
// HTTP alike, by telling each node which peer IPs it may no longer reach
// or hear from. It plugs into a node through the node's hooks
// (cluster.Hooks: Dial is DialContext, RaftStream is StreamLayer, Gossip
// is Memberlist); production nodes create no Filter and set no hook, and
// package cluster does not import this one.
//
// # Rules
//
// A Filter holds one node's Rules: DropOut and DropIn, lists of peer IP
// addresses (host names are accepted and resolved when the rules are set).
// Set replaces the rules and, before it returns, closes every tracked live
// connection the new rules disallow.
//
// DropOut P means this node cannot reach P:
//   - dials to P fail at once with a *net.OpError (Op "dial") wrapping
//     ErrBlocked, without connecting;
//   - live connections this node initiated to P are closed;
//   - UDP packets to P are dropped silently (the write reports success).
//
// DropIn P means P cannot reach this node:
//   - connections accepted from P are closed on accept (the caller of
//     Accept never sees them), and live ones are closed by Set;
//   - UDP packets from P are dropped.
//
// The drops are per connection, by who initiated it: DropOut P does not
// affect a connection P initiated, and DropIn P does not affect a
// connection this node initiated. A one-way cut A→B is made by setting
// DropOut B on A and DropIn A on B. Then A can neither open a connection
// to B nor send B a packet, but B can still open connections to A, and
// those TCP connections carry traffic both ways (requests from B and A's
// answers). UDP is cut per packet, so A's answers to B's UDP probes are
// dropped. A full cut between A and B is both one-way cuts; a 2|3 split is
// a full cut between every pair across the split; a bridge is a node with
// no rules against either side.
//
// # What is filtered
//
// Only traffic through the Filter's wrappers is seen:
//   - Listener wraps an accepting listener (the node's HTTP API);
//   - DialContext wraps a dial function (the node-to-node HTTP client);
//   - StreamLayer wraps a raft.StreamLayer (Raft);
//   - Memberlist wraps memberlist's NetTransport (gossip, TCP and UDP).
//
// Peers are matched by the IP of the connection's remote end (of the
// packet's source or destination). A caller the rules do not name, such as
// a test harness reaching a container through a published port (it appears
// as the bridge gateway's IP), is never affected. Rules naming this node's
// own IP cut it off from itself: do not.
//
// Every live connection a wrapper hands out is tracked, by peer IP and by
// direction (initiated by this node or accepted from the peer), until it is
// closed.
//
// # Control
//
// Handler serves the rules over HTTP for the harness: GET returns them,
// PUT replaces them; both need the cluster key.
package faultnet
