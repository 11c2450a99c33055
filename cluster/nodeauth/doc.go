// Package nodeauth authenticates the nodes of a Carmy cluster to each
// other on their Raft connections, and holds the credentials and the
// protocol version the node-to-node HTTP calls check too. A node is
// recognised by what it holds, never by its address.
//
//   - Node TLS (tls.go): Files names the cluster CA and a node's
//     certificate and key; TLS loads them (and reloads them when they
//     change) and gives the server and client configurations of mutual
//     TLS 1.3, which accept only a peer certificate chained to the CA and
//     carrying the node role. NewTLSStream runs a Raft stream layer over
//     it.
//   - The cluster key (raftauth.go): without node TLS, NewKeyStream has
//     both ends of every Raft connection prove they hold the key by a
//     challenge-response handshake before a Raft byte crosses it.
//   - The preamble (identity.go): IdentityStream starts every Raft
//     connection with "carmy-raft/<ProtocolVersion> <server id>", and the
//     accepting node closes a connection of another protocol version or
//     meant for another server.
//   - The protocol version (protocol.go): ProtocolVersion, and
//     ProtocolMismatch, the error that names both versions.
//   - Refusals (refusal.go): refused peers are logged at WARN, at most one
//     line per 10 s with the count of the others.
//
// An accepted connection's handshake runs on its first Read or Write,
// never in Raft's accept loop, so that a silent peer stalls no other.
// The cluster package stacks the layers (plain TCP, then TLS or the key,
// then the preamble), and package peer checks the same credentials and
// version on the node-to-node HTTP calls. Nothing older than
// ProtocolVersion 1 is read, so the package has no compat.go.
package nodeauth
