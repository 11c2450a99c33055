package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// FSM is the raft.BatchingFSM over a Processor. Raft calls Apply,
// ApplyBatch, Snapshot and Restore from one goroutine; the read methods may
// be called concurrently with them from any goroutine.
type FSM struct {
	mu      sync.RWMutex
	p       *Processor
	applied atomic.Uint64
	// observer, when set, sees every applied command of the observed
	// types and its response after the state changed. It runs on Raft's
	// apply goroutine and must not block.
	observer func(index uint64, c Command, r Response)
	observed map[Type]bool

	waitMu  sync.Mutex
	waiters map[chan struct{}]uint64

	// ledger, when set, receives the audit entries of what is applied.
	ledger *Ledger
}

var _ raft.BatchingFSM = (*FSM)(nil)

// New returns an empty FSM.
func New() *FSM {
	return &FSM{p: NewProcessor(), waiters: make(map[chan struct{}]uint64)}
}

// Observe installs the observer of the commands of the given types
// (before Raft starts). Only those are kept aside for it: the hot path's
// reserves and completes cost nothing when they are not observed.
func (f *FSM) Observe(fn func(index uint64, c Command, r Response), types ...Type) {
	f.observer = fn
	f.observed = make(map[Type]bool, len(types))
	for _, t := range types {
		f.observed[t] = true
	}
}

// SetLedger makes l the FSM's audit ledger (before Raft starts): the
// entries of every command applied from then on are written to it, and
// snapshots carry it. Without one, the FSM keeps no ledger.
func (f *FSM) SetLedger(l *Ledger) { f.ledger = l }

// Ledger returns the FSM's audit ledger (nil: none).
func (f *FSM) Ledger() *Ledger { return f.ledger }

// Apply implements raft.FSM. For a batch entry it returns a Responses,
// one per command in order (a command it cannot decode answered with Code
// store.CodeInvalidRequest, the others applied); for an entry that is not
// a batch it can read, a single Response with that code, having changed
// nothing; nil for other log types. Every replica of a build answers an
// entry alike, so a refusal keeps them equal.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// Responses is what applying a batch entry returns: the Response of each
// of its commands, in order.
type Responses []Response

// observed is one applied command kept aside for the observer.
type observed struct {
	index uint64
	cmd   Command
	resp  Response
}

// ApplyBatch implements raft.BatchingFSM: the entries are applied under
// one lock acquisition, and each answered as Apply says.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	var (
		seen   []observed
		groups []ledgerGroup
	)
	f.mu.Lock()
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		cmds, err := DecodeBatch(l.Data)
		if err != nil {
			// A committed entry that this node cannot read: every
			// replica refuses it alike, and the proposer learns why.
			out[i] = invalidResponse(err.Error())
			continue
		}
		rs := make(Responses, len(cmds))
		if f.ledger != nil {
			// Most commands draft one entry: room for them at once.
			f.p.drafts = slices.Grow(f.p.drafts, len(cmds))
		}
		for pos, data := range cmds {
			rs[pos] = f.applyOne(l.Index, Token(l.Index, pos), data, &seen)
		}
		out[i] = rs
		if drafts, cut := f.p.TakeDrafts(); f.ledger != nil && (len(drafts) > 0 || !cut.IsZero()) {
			groups = append(groups, ledgerGroup{index: l.Index, drafts: drafts, prune: cut})
		}
	}
	if n := len(logs); n > 0 {
		f.applied.Store(logs[n-1].Index)
	}
	f.mu.Unlock()
	// Queued for the ledger's writer (ledger_queue.go). Snapshot, the
	// only reader that must see the ledger and the state at one index,
	// runs on this goroutine and flushes the queue first.
	if len(groups) > 0 {
		f.ledger.enqueue(groups)
	}
	for _, a := range seen {
		f.observer(a.index, a.cmd, a.resp)
	}
	if n := len(logs); n > 0 {
		f.wake(logs[n-1].Index)
	}
	return out
}

// applyOne decodes and applies one command of the batch entry at index,
// with token as its fencing token, and keeps it aside for the observer. f.mu
// is held.
func (f *FSM) applyOne(index, token uint64, data []byte, seen *[]observed) Response {
	c, err := Decode(data)
	if err != nil {
		return invalidResponse(err.Error())
	}
	r := f.p.Apply(token, c)
	if f.observer != nil && f.observed[c.Type] {
		*seen = append(*seen, observed{index, c, r})
	}
	return r
}

// Snapshot implements raft.FSM. Under the read lock it only copies the
// records' structs (their payloads are immutable and shared); Persist
// writes them out one by one while the FSM goes on applying, so neither
// the apply goroutine waits for the encoding nor is the snapshot ever held
// in memory as a whole.
//
// The snapshot carries the audit ledger from a read transaction opened
// here (Raft calls Snapshot between applies, so it stands at the same
// index as the state). A ledger whose writes failed refuses: Raft then
// keeps the log that a restart needs to write the ledger again.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	d := f.capture()
	if f.ledger != nil {
		v, err := f.ledger.view()
		if err != nil {
			return nil, fmt.Errorf("fsm: snapshot: %w", err)
		}
		d.Ledger = v
	}
	return &fsmSnapshot{data: d}, nil
}

// capture copies what a snapshot holds, with the index it stands at,
// under the read lock; it is encoded afterwards, without the lock.
func (f *FSM) capture() snapshotData {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d := f.p.snapshot()
	d.Index = f.applied.Load()
	return d
}

// Restore implements raft.FSM: the state is decoded aside and swapped in
// under the write lock, so readers never see a half-restored state.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	fresh := NewProcessor()
	var sink ledgerSink
	if f.ledger != nil {
		sink = func(index uint64, cp, head audit.Head, next func() ([]byte, error)) error {
			return f.ledger.restore(index, cp, head, next)
		}
	}
	if err := fresh.restore(rc, sink); err != nil {
		return err
	}
	f.mu.Lock()
	f.p = fresh
	f.mu.Unlock()
	// Raft does not tell the FSM a snapshot's index; the snapshot does.
	f.SetApplied(fresh.restoredIndex)
	return nil
}

type fsmSnapshot struct{ data snapshotData }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	err := s.data.writeTo(sink)
	s.data.Ledger.release()
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm: persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.data.Ledger.release() }

// AppliedIndex returns the index of the last entry applied.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// SetApplied records the index a restored snapshot stands at (Raft
// restores snapshots without telling their index to the FSM).
func (f *FSM) SetApplied(index uint64) {
	for {
		cur := f.applied.Load()
		if index <= cur || f.applied.CompareAndSwap(cur, index) {
			break
		}
	}
	f.wake(index)
}

// WaitApplied returns a channel closed once the FSM has applied index.
func (f *FSM) WaitApplied(index uint64) <-chan struct{} {
	ch := make(chan struct{})
	if f.applied.Load() >= index {
		close(ch)
		return ch
	}
	f.waitMu.Lock()
	f.waiters[ch] = index
	f.waitMu.Unlock()
	if f.applied.Load() >= index {
		f.wake(index)
	}
	return ch
}

func (f *FSM) wake(index uint64) {
	f.waitMu.Lock()
	defer f.waitMu.Unlock()
	for ch, want := range f.waiters {
		if want <= index {
			close(ch)
			delete(f.waiters, ch)
		}
	}
}

// Reads. Each sees the state as of the last applied entry.

// Get returns the record of an execution.
func (f *FSM) Get(executionID string) (store.Record, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.p.st.Get(executionID)
}

// Lookup returns the record of an identity.
func (f *FSM) Lookup(key store.Key) (store.Record, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.p.st.Lookup(key)
}

// List returns one page of a session's records.
func (f *FSM) List(q store.ListQuery) store.Page {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.p.st.List(q)
}

// Stats returns the number of records and the capacity, and the bytes
// held and their bound.
func (f *FSM) Stats() store.Stats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return store.Stats{Entries: f.p.st.Len(), Capacity: f.p.st.Capacity(), Bytes: f.p.st.Bytes(), MaxBytes: f.p.st.MaxBytes()}
}

// Interrupted counts the interrupted records this replica has applied.
func (f *FSM) Interrupted() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.p.st.Interrupted()
}

// CapacitySet reports whether the cluster's capacity has been set.
func (f *FSM) CapacitySet() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.p.CapacitySet()
}

// Nodes returns the member table.
func (f *FSM) Nodes() []NodeInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.p.Nodes()
}

// Node returns one member's addresses.
func (f *FSM) Node(id string) (NodeInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.p.Node(id)
}

// Hash returns the SHA-256 (hex) of the state's snapshot bytes: equal on
// replicas that applied the same log.
func (f *FSM) Hash() (string, error) {
	d := f.capture()
	d.Index = 0 // a hash compares states, not positions
	h := sha256.New()
	if err := d.writeTo(h); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// SnapshotBytes returns the bytes Snapshot would persist now (for tests
// and tools).
func (f *FSM) SnapshotBytes() ([]byte, error) {
	s, err := f.Snapshot()
	if err != nil {
		return nil, err
	}
	defer s.Release()
	var b bytes.Buffer
	if err := s.(*fsmSnapshot).data.writeTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
