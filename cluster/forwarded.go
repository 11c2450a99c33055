package cluster

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/store"
)

// forwardedBatch is a batch of forwarded commands on its way through the
// leader: startForwarded hands its commands to the proposer, and
// finishForwarded waits for their outcomes.
type forwardedBatch struct {
	cmds    [][]byte
	omit    []bool // omit[i]: command i's sender asked for its success without the record's data (forward.AppendBatch)
	results []peer.Result
	// items are the proposals, nil for a command refused at the door;
	// items itself is nil on a node that did not lead.
	items []*proposal
	start time.Time
}

// startForwarded hands cmds to the proposer, all at once, so they share
// rounds with each other and with local writes. On a node that does not
// lead, nothing is proposed: every command's answer is "not the leader".
func (n *Node) startForwarded(cmds [][]byte, omit []bool) *forwardedBatch {
	b := &forwardedBatch{cmds: cmds, omit: omit, results: make([]peer.Result, len(cmds)), start: time.Now()}
	if !n.IsLeader() {
		for i := range b.results {
			b.results[i] = peer.Result{Error: peer.ErrorOf(peer.ErrNotLeader)}
		}
		return b
	}
	b.items = make([]*proposal, len(cmds))
	queue := make([]*proposal, 0, len(cmds))
	// The commands are not decoded here: the FSM decodes each once, and
	// answers one it cannot read with INVALID_REQUEST on every replica
	// alike. Only an empty command, one over the size every node refuses
	// (checkSize), or a reservation while this node's log waits for disk
	// space (refuseForwardedOnFullDisk) is refused at the door.
	for i, raw := range cmds {
		if len(raw) == 0 {
			b.results[i] = peer.Result{Error: peer.Coded(store.CodeInvalidRequest, "empty command")}
			continue
		}
		if err := checkSize("forwarded", raw); err != nil {
			b.results[i] = peer.Result{Error: peer.ErrorOf(err)}
			continue
		}
		if err := n.refuseForwardedOnFullDisk(raw); err != nil {
			b.results[i] = peer.Result{Error: peer.ErrorOf(err)}
			continue
		}
		b.items[i] = newProposal(raw, n.cfg.LeaderWait)
		queue = append(queue, b.items[i])
	}
	n.proposer.propose(queue...)
	return b
}

// done reports whether every command of b has its outcome (or was
// refused at the door), so that finishForwarded will not wait.
func (b *forwardedBatch) done() bool {
	for _, it := range b.items {
		if it != nil && len(it.done) == 0 {
			return false
		}
	}
	return true
}

// finishForwarded waits for the outcome of every command of b, as a local
// command's is waited for (awaitProposal, bounded by LeaderWait only while
// the log waits for disk space), logs the batch (audit, with r's caller)
// and returns its results.
func (n *Node) finishForwarded(r *http.Request, b *forwardedBatch) []peer.Result {
	kinds := commandKinds(b.cmds)
	if b.items == nil {
		n.audit(r, "apply", slog.Int("commands", len(b.cmds)), slog.String("kinds", kinds), slog.String("outcome", "not the leader"))
		return b.results
	}
	for i, it := range b.items {
		if it == nil {
			continue
		}
		out := n.awaitProposal(it, b.start.Add(n.cfg.LeaderWait))
		resp, err := out.resp, out.err
		n.observeApply(originForwarded, b.start, err)
		if err != nil {
			b.results[i] = peer.Result{Error: peer.ErrorOf(err)}
			continue
		}
		if b.omit[i] && resp.Code == "" {
			resp.Record.Data, resp.Record.Error = nil, nil
		}
		b.results[i] = peer.Result{Response: &resp}
	}
	applied, refused, failed := 0, 0, 0
	for _, res := range b.results {
		switch {
		case res.Response != nil && res.Response.Code == "":
			applied++
		case res.Response != nil:
			refused++ // applied, with an outcome such as a conflict
		default:
			failed++
		}
	}
	n.audit(r, "apply", slog.Int("commands", len(b.cmds)), slog.String("kinds", kinds),
		slog.String("outcome", "done"), slog.Int("ok", applied), slog.Int("refused", refused), slog.Int("failed", failed))
	return b.results
}
