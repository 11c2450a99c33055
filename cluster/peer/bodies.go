package peer

import "github.com/carmyhq/carmy/fsm"

// Size bounds of the peer calls.
//
// MaxRequestBytes bounds the body of a request (a join, a removal, a
// silence check: a few hundred bytes); Handler refuses a longer one.
// MaxAnswerBytes bounds an answer a Client reads (a join's lists the
// members). A forward stream's frames have their own bounds (package
// forward).
const (
	MaxRequestBytes = 1 << 20
	MaxAnswerBytes  = 64 << 20
)

// IndexAnswer is the answer of PathReadIndex: the index a linearizable
// read must wait for.
type IndexAnswer struct {
	Index uint64 `json:"index"`
}

// JoinAnswer is the answer of PathJoin: the members, the node that
// answered among them with its gossip address.
type JoinAnswer struct {
	Nodes []fsm.NodeInfo `json:"nodes"`
}

// RemoveRequest is the body of PathRemove.
type RemoveRequest struct {
	ID string `json:"id"`
}

// SilenceRequest is the body of PathSilence: with Check, the node runs
// Raft's check of the leader's silence before it answers.
type SilenceRequest struct {
	Check bool `json:"check"`
}

// LogPosition is how far a node's log goes (the answer of PathSilence):
// what a vote compares.
type LogPosition struct {
	LastTerm  uint64 `json:"last_term"`
	LastIndex uint64 `json:"last_index"`
}

// StateDigest describes the replicated state a node has applied, for
// checking that replicas converge (the answer of PathState).
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
