package cluster

import (
	"net/http"

	"github.com/carmyhq/carmy/cluster/wire"
)

// StateDigest describes the replicated state a node has applied, for
// checking that replicas converge (GET /internal/v1/state).
type StateDigest struct {
	// AppliedIndex is Raft's last applied log index (every entry type).
	AppliedIndex uint64 `json:"applied_index"`
	// FSMIndex is the index of the last entry the state machine applied
	// (or of the snapshot it was restored from).
	FSMIndex uint64 `json:"fsm_index"`
	// Hash is the SHA-256 of the state machine's contents, index excluded:
	// equal on replicas that applied the same log.
	Hash string `json:"hash"`
	// Records counts the identities held.
	Records int `json:"records"`
	// LastIndex is the last index of the node's Raft log or snapshot: 0
	// only on a node that holds no cluster state at all.
	LastIndex uint64 `json:"last_index"`
}

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

func (n *Node) serveState(w http.ResponseWriter, _ *http.Request) {
	d, err := n.Digest()
	if err != nil {
		writeInternalError(w, http.StatusInternalServerError, wire.ErrorOf(err))
		return
	}
	writeJSON(w, http.StatusOK, d)
}
