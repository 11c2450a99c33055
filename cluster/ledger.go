package cluster

import (
	"fmt"
	"io"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// AuditHead returns the {seq, hash} of the last entry of this node's audit
// ledger, as of its last applied log entry. A ledger whose writes failed
// is store.ErrUnavailable, naming the failure.
func (n *Node) AuditHead() (audit.Head, error) {
	if err := n.ledger.Err(); err != nil {
		return audit.Head{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return n.ledger.Head(), nil
}

// AuditExport writes this node's audit ledger to w from the entry after
// seq after, at most limit entries (fsm.Ledger.Export: a checkpoint line
// first unless it starts at the first entry), and returns the seq of the
// last one written.
func (n *Node) AuditExport(w io.Writer, after uint64, limit int) (uint64, error) {
	if err := n.ledger.Err(); err != nil {
		return 0, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return n.ledger.Export(w, after, limit)
}
