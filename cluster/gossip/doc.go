// Package gossip holds the parts of a node's memberlist membership that do
// not need the node: Members, the event delegate that tracks what gossip
// says of each member (its advertised addresses, and since when it is
// dead); Delegate, which serves this node's metadata; Keys, the keys
// gossip runs under (given ones, or one derived from the cluster key by
// HKDF-SHA256, info "carmy gossip key v1", so that gossip is encrypted and
// authenticated by default); HookedTransport, memberlist's transport
// wrapped by a test hook; and Cache, the copy of the replicated member
// table in the data dir (members.json) that lets a restarted node find its
// peers before Raft has applied anything.
//
// The cluster package creates the memberlist member, joins and rejoins
// the pool, and reads Members for the leader's duties and its status.
// Nothing older is read in members.json, so the package has no compat.go.
package gossip
