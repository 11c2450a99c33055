package store

import (
	"context"
	"sync"
	"time"
)

// DefaultCapacity is the default bound of the in-memory store.
const DefaultCapacity = 10000

// Memory is the default Store: process-local, bounded, and lost when the
// process exits. When full it fails closed with ErrCapacity and it never
// evicts a record, since any record may stand for a committed effect.
// It is safe for concurrent use.
type Memory struct {
	mu sync.Mutex
	st *State
}

var _ RunningNodeLister = (*Memory)(nil)

var (
	_ Store   = (*Memory)(nil)
	_ Expirer = (*Memory)(nil)
)

// NewMemory returns an empty in-memory store holding at most capacity
// records (DefaultCapacity when capacity <= 0).
func NewMemory(capacity int) *Memory {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Memory{st: NewState(capacity)}
}

// SetMaxBytes bounds the bytes the store holds (RecordSize summed over its
// records; 0: no bound, the default). A reservation that does not fit is
// refused with a *CapacityError; see Store.Reserve and Store.Complete.
func (m *Memory) SetMaxBytes(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.SetMaxBytes(n)
}

// Reserve implements Store.
func (m *Memory) Reserve(ctx context.Context, key Key, fingerprint string, exec Execution) (Reservation, error) {
	if err := ctx.Err(); err != nil {
		return Reservation{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Reserve(key, fingerprint, exec, m.st.LastSeq()+1)
}

// PeekFinished implements Peeker.
func (m *Memory) PeekFinished(key Key) (Record, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, err := m.st.Lookup(key)
	return rec, err == nil && rec.Status.Finished()
}

// Complete implements Store.
func (m *Memory) Complete(ctx context.Context, key Key, fingerprint string, res Result) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Complete(key, fingerprint, res)
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, executionID string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Get(executionID)
}

// Lookup implements Store.
func (m *Memory) Lookup(_ context.Context, key Key) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Lookup(key)
}

// List implements Store.
func (m *Memory) List(_ context.Context, q ListQuery) (Page, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.List(q), nil
}

// RunningNodes implements RunningNodeLister.
func (m *Memory) RunningNodes(_ context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.RunningNodes(), nil
}

// Cancel implements Store.
func (m *Memory) Cancel(ctx context.Context, executionID string, res Result) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Cancel(executionID, res)
}

// Resolve implements Store.
func (m *Memory) Resolve(ctx context.Context, executionID string, r Resolution) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Resolve(executionID, r)
}

// Release implements Store.
func (m *Memory) Release(ctx context.Context, executionID string, allowRunning bool) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Release(executionID, allowRunning)
}

// Decide implements Store.
func (m *Memory) Decide(ctx context.Context, executionID string, d Decision) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Decide(executionID, d, m.st.LastSeq()+1)
}

// MarkInterrupted implements Store.
func (m *Memory) MarkInterrupted(ctx context.Context, nodeID string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.MarkInterrupted(nodeID), nil
}

// Expire implements Expirer.
func (m *Memory) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Expire(cutoff), nil
}

// Stats implements Store.
func (m *Memory) Stats(context.Context) (Stats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stats{Entries: m.st.Len(), Capacity: m.st.Capacity(), Bytes: m.st.Bytes(), MaxBytes: m.st.MaxBytes()}, nil
}

// Interrupted implements InterruptedCounter.
func (m *Memory) Interrupted(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Interrupted(), nil
}
