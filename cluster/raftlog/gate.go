package raftlog

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// GatedFSM is f as Raft must see it over s: it applies an entry only once
// the leader's own copy of it is on disk (QueuedLog). On a follower every
// entry it applies is already written, and nothing waits.
func GatedFSM(f raft.BatchingFSM, s *QueuedLog) raft.BatchingFSM {
	return gatedFSM{BatchingFSM: f, log: s}
}

// gatedFSM is GatedFSM's state machine.
type gatedFSM struct {
	raft.BatchingFSM
	log *QueuedLog
}

// Apply implements raft.FSM.
func (g gatedFSM) Apply(l *raft.Log) any {
	if err := g.wait(l.Index); err != nil {
		return err
	}
	return g.BatchingFSM.Apply(l)
}

// ApplyBatch implements raft.BatchingFSM.
func (g gatedFSM) ApplyBatch(logs []*raft.Log) []any {
	if len(logs) > 0 {
		if err := g.wait(logs[len(logs)-1].Index); err != nil {
			out := make([]any, len(logs))
			for i := range out {
				out[i] = err
			}
			return out
		}
	}
	return g.BatchingFSM.ApplyBatch(logs)
}

// Snapshot implements raft.FSM, refused once the log gave up writing
// entries (the node stops on a full disk): the state machine skipped
// them, and a snapshot would claim it had applied them.
func (g gatedFSM) Snapshot() (raft.FSMSnapshot, error) {
	if g.log.gaveUp() {
		return nil, fmt.Errorf("cluster: no snapshot: %w", errLogClosed)
	}
	return g.BatchingFSM.Snapshot()
}

// wait returns once the log holds every entry up to index on disk; while
// the disk is full it waits for room. If the log never will hold them,
// either the node is stopping on a full disk and wait returns an error
// matching errLogClosed (the entry is not applied: the node applies
// nothing more, and a caller waiting on it hears its outcome is unknown),
// or the write failed for another reason and the node stops: Raft has
// counted and sent entries this node could not store, and applying on
// top of them could answer a caller with an outcome no quorum holds.
func (g gatedFSM) wait(index uint64) error {
	err := g.log.waitDurable(index)
	if err == nil || errors.Is(err, errLogClosed) {
		return err
	}
	panic(fmt.Sprintf("cluster: the node stops: its raft log could not be written, so it cannot apply entry %d: %v", index, err))
}

// CappedTransport is t with every commit index the leader sends lowered
// below the first entry s has not written (QueuedLog.commitCap): a follower
// applies only what the leader holds on disk too.
func CappedTransport(t *raft.NetworkTransport, s *QueuedLog) raft.Transport {
	return cappedTransport{NetworkTransport: t, log: s}
}

// cappedTransport is CappedTransport's transport.
type cappedTransport struct {
	*raft.NetworkTransport
	log *QueuedLog
}

// AppendEntries implements raft.Transport.
func (t cappedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.NetworkTransport.AppendEntries(id, target, t.capped(args), resp)
}

// AppendEntriesPipeline implements raft.Transport.
func (t cappedTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return cappedPipeline{AppendPipeline: p, t: t}, nil
}

// capped returns args with its commit index capped: a copy when it
// changes, args itself otherwise (a heartbeat carries no commit index).
func (t cappedTransport) capped(args *raft.AppendEntriesRequest) *raft.AppendEntriesRequest {
	c := t.log.commitCap(args.LeaderCommitIndex)
	if c == args.LeaderCommitIndex {
		return args
	}
	a := *args
	a.LeaderCommitIndex = c
	return &a
}

// cappedPipeline is a pipelined AppendEntries stream of cappedTransport.
type cappedPipeline struct {
	raft.AppendPipeline
	t cappedTransport
}

// AppendEntries implements raft.AppendPipeline.
func (p cappedPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	return p.AppendPipeline.AppendEntries(p.t.capped(args), resp)
}
