package cluster

import "github.com/carmyhq/carmy/cluster/peer"

// StateDigest describes the replicated state a node has applied, for
// checking that replicas converge (peer.PathState).
type StateDigest = peer.StateDigest

// Digest returns the node's StateDigest. AppliedIndex and Hash are read
// one after the other, so they agree only while nothing is being applied:
// compare digests of a quiet cluster, twice.
func (n *Node) Digest() (StateDigest, error) {
	d := StateDigest{AppliedIndex: n.raft.AppliedIndex(), FSMIndex: n.fsm.AppliedIndex(), LastIndex: n.raft.LastIndex()}
	h, err := n.fsm.Hash()
	if err != nil {
		return d, err
	}
	d.Hash = h
	d.Records = n.fsm.Stats().Entries
	return d, nil
}
