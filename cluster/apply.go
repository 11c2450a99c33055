package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/cluster/raftlog"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/internal/tracing"
	"github.com/carmyhq/carmy/store"
)

// Apply commits c through Raft and returns its Response. On the leader it
// is raft.Apply; on a follower the command is forwarded (batched with
// concurrent ones) to the leader. While no leader is known it waits up to
// LeaderWait.
//
// Errors: store.ErrUnavailable means c was not applied (no leader in time,
// node shutting down); store.ErrCommitUnknown means c may or may not have
// been applied; store.ErrInvalid means c was refused before it was
// proposed (it cannot be encoded, or it is over peer.MaxCommandBytes encoded).
// A reservation is refused with store.ErrUnavailable while this node leads
// with a log that waits for disk space (refuseOnFullDisk); one already
// proposed when the log stalls gets store.ErrCommitUnknown at once
// (awaitProposal).
// The Response's own error (Response.Err) is an application outcome,
// committed like any other.
//
// The command is stamped here, by the node that proposes it, with its time
// and its actor for the audit ledger (unless set already): the actor
// store.WithActor put in ctx, else this node.
func (n *Node) Apply(ctx context.Context, c fsm.Command) (fsm.Response, error) {
	if c.At.IsZero() {
		c.At = time.Now().UTC()
	}
	if c.Actor == "" {
		if c.Actor = store.ActorFrom(ctx); c.Actor == "" {
			c.Actor = n.cfg.NodeID
		}
	}
	data, err := fsm.Encode(c)
	if err != nil {
		return fsm.Response{}, err
	}
	if err := checkSize(c.Type, data); err != nil {
		return fsm.Response{}, err
	}
	// A completion's answer need not carry its result back to the node
	// that sent it: the leader leaves it out, and it is put back here.
	omitResult := c.Type == fsm.TypeComplete
	var resp fsm.Response
	err = n.untilLeader(ctx, "no leader", func(deadline time.Time) error {
		var err error
		if n.IsLeader() {
			if err := n.refuseOnFullDisk(c.Type); err != nil {
				return err
			}
			resp, err = n.applyLocal(data, deadline)
			return err
		}
		leader, ok := n.leaderHTTP()
		if !ok {
			return peer.ErrNotSent
		}
		fctx, span := tracing.Start(ctx, tracing.SpanForward)
		resp, err = n.fwd.Apply(fctx, leader, data, deadline, omitResult)
		tracing.End(span, tracing.AttrLeader, leader, err)
		if err == nil && omitResult {
			putResultBack(&resp, *c.Result)
		}
		return err
	})
	return resp, err
}

// putResultBack puts into a completion's record the data and error that
// the leader left out of its answer: those of res, the result the
// completion carried, as its log entry holds them (fsm.Logged: the bytes
// can differ from res's, and the record must be the one every replica
// holds). A refused completion's record is another's, and comes whole; so
// does a successful one from a leader of an older build, which is left as
// it is.
func putResultBack(resp *fsm.Response, res store.Result) {
	if resp.Code != "" || resp.Record.Data != nil || resp.Record.Error != nil {
		return
	}
	// Not failing: the command was encoded with these bytes.
	resp.Record.Data, _ = fsm.Logged(res.Data)
	resp.Record.Error, _ = fsm.Logged(res.Error)
}

// checkSize refuses an encoded command over peer.MaxCommandBytes: no leader
// would take it.
func checkSize(t fsm.Type, data []byte) error {
	if len(data) > peer.MaxCommandBytes {
		return fmt.Errorf("%w: a %s command of %d bytes is over the limit of %d", store.ErrInvalid, t, len(data), peer.MaxCommandBytes)
	}
	return nil
}

// untilLeader runs attempt until it returns anything but peer.ErrNotLeader or
// peer.ErrNotSent (which mean nothing was applied anywhere: ask again), waiting
// between tries with a short backoff, for at most LeaderWait (or ctx's
// deadline, if sooner). deadline is when the last try must end. When time
// runs out the error is store.ErrUnavailable, saying what (such as "no
// leader") was missing.
func (n *Node) untilLeader(ctx context.Context, what string, attempt func(deadline time.Time) error) error {
	deadline := time.Now().Add(n.cfg.LeaderWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for try := 0; ; try++ {
		err := attempt(deadline)
		if err == nil || !(errors.Is(err, peer.ErrNotLeader) || errors.Is(err, peer.ErrNotSent)) {
			return err
		}
		if n.stopped() {
			return fmt.Errorf("%w: the node is shutting down", store.ErrUnavailable)
		}
		wait := min(10*time.Millisecond<<min(try, 4), 100*time.Millisecond)
		if time.Until(deadline) < wait {
			return fmt.Errorf("%w: %s within %s (%w)", store.ErrUnavailable, what, n.cfg.LeaderWait, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// applyLocal applies data on this node as leader. It waits for the
// outcome however long the commit takes, except while the log waits for
// disk space (awaitProposal), so that a caller is not held for as long as
// the disk is full.
func (n *Node) applyLocal(data []byte, deadline time.Time) (fsm.Response, error) {
	start := time.Now()
	it := newProposal(data, max(time.Until(deadline), 10*time.Millisecond))
	n.proposer.propose(it)
	r := n.awaitProposal(it, deadline)
	n.observeApply(originLocal, start, r.err)
	return r.resp, r.err
}

// awaitProposal waits for it's outcome, proposed on this node as leader
// (its own or a forwarded command), except while the log waits for disk
// space, when nothing more is applied until there is room: the answer is
// then store.ErrCommitUnknown (the entry is applied once there is room, or
// by the next leader, or never), for a reservation as soon as the log
// stalls, for any other command past deadline (checked again every
// raftlog.DiskFullRetryMax after). A reservation's caller is so answered
// at once: its tool has not run, and the runtime that proposed it releases
// it should it commit after all; a completion, whose tool did run, waits
// for room as long as its caller does.
func (n *Node) awaitProposal(it *proposal, deadline time.Time) proposalResult {
	t := time.NewTimer(max(time.Until(deadline), 0))
	defer t.Stop()
	var stall <-chan struct{} // nil: never ready
	if typ, ok := fsm.PeekType(it.data); ok && typ == fsm.TypeReserve {
		stall = n.logs.QueueStall()
	}
	for {
		select {
		case r := <-it.done:
			return r
		case <-stall:
			select {
			case r := <-it.done:
				return r // its outcome came with the stall
			default:
			}
			if err := n.diskFullUnknown(); err != nil {
				return proposalResult{err: err}
			}
			stall = n.logs.QueueStall() // the log writes again: wait for its next stall
		case <-t.C:
			if err := n.diskFullUnknown(); err != nil {
				return proposalResult{err: err}
			}
			t.Reset(raftlog.DiskFullRetryMax)
		}
	}
}

// diskFullUnknown returns the store.ErrCommitUnknown a proposal waiting
// on this node's log is answered with while the log waits for disk space,
// or nil when it does not.
func (n *Node) diskFullUnknown() error {
	_, err := n.logs.Stalled()
	if err == nil || !n.logs.QueueStalled() {
		return nil
	}
	return fmt.Errorf("%w: the write waits for disk space on node %s, and is applied once there is room, unless leadership changes first (%w)",
		store.ErrCommitUnknown, n.cfg.NodeID, err)
}

// Origins of the commands a leader applies, for carmy_raft_applies_total.
const (
	originLocal     = "local"
	originForwarded = "forwarded"
)

// observeApply counts one apply by this node as leader and its duration.
func (n *Node) observeApply(origin string, start time.Time, err error) {
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, peer.ErrNotLeader):
		result = "not_leader"
	case errors.Is(err, store.ErrCommitUnknown):
		result = "commit_unknown"
	default:
		result = "unavailable"
	}
	n.metrics.applies.WithLabelValues(origin, result).Inc()
	if err == nil {
		n.metrics.applyDuration.Observe(time.Since(start).Seconds())
	}
}

// leaderHTTP returns the leader's HTTP address, when a leader other than
// this node is known.
func (n *Node) leaderHTTP() (string, bool) {
	_, id := n.raft.LeaderWithID()
	if id == "" || string(id) == n.cfg.NodeID {
		return "", false
	}
	return n.httpAddrOf(string(id))
}

// Leader returns the leader's id and HTTP address ("" when unknown).
func (n *Node) Leader() (id, httpAddr string) {
	_, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	if string(lid) == n.cfg.NodeID {
		return n.cfg.NodeID, n.cfg.HTTPAddr
	}
	addr, _ := n.leaderHTTP()
	return string(lid), addr
}
