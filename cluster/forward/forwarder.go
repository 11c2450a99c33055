package forward

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// Forwarder carries a follower's commands to the leader. Concurrent
// commands are gathered into one batch (up to MaxBatch of them and
// MaxBatchBytes together), and up to MaxInFlight batches are in flight at
// once, so followers pay one round trip per batch rather than per
// command. Batches go over one kept-alive stream per leader address
// (stream.go).
type Forwarder struct {
	dial Dialer
	obs  Observer

	// ctx ends when the Forwarder is closed: callers stop waiting, and
	// streams being opened give up.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	queues  map[string][]*item     // by leader address
	streams map[string]*streamSlot // by leader address
	wake    chan struct{}
	sem     chan struct{}

	// heard is when a leader last answered a batch (unix nanoseconds):
	// a leader that answers is busy, not silent (HeardSince).
	heard atomic.Int64
}

// HeardSince reports whether a leader answered a batch after t.
func (f *Forwarder) HeardSince(t time.Time) bool { return f.heard.Load() > t.UnixNano() }

// Bounds of a forwarded batch.
//
// MaxBatchBytes bounds the commands of one request together, a command
// larger than that going alone. 4 MiB is far above what the count bound
// lets ordinary commands reach (512 reservations or small completions, a
// few hundred bytes each), so batching on the hot path is as before; it
// only splits batches of large results (up to the API's 1 MiB each by
// default). For those a larger request buys nothing: its cost is moving
// and decoding its bytes, not its round trip, and the leader's proposer
// puts the commands of consecutive requests into one Raft round anyway.
// A smaller one keeps each request to milliseconds of sending and
// decoding, far from the forward's deadline.
//
// MaxInFlight bounds the batches in flight to one leader, and with them
// what they hold in memory on either side: a batch takes one slot per
// started MiB of its commands (inFlightSlotBytes), so at most about 32 MiB
// of batches are in flight however large the results (a single command
// larger than that takes every slot and goes alone). Ordinary batches (a
// few KiB) take one slot each. On a stream more batches in flight cost
// nothing but their bytes, and let commands leave at once rather than
// wait for a slot: 32 against 8 gave about 7% more calls/s on 3 nodes at
// 64 clients (docs/performance.md).
//
// The leader's frame limit (MaxBatchFrame) holds the largest batch the
// Forwarder builds: MaxBatchBytes, or one command of up to peer.MaxCommandBytes,
// plus the envelope. So the leader never refuses a batch for its size.
const (
	MaxBatch      = 512
	MaxBatchBytes = 4 << 20
	MaxInFlight   = 32

	inFlightSlotBytes = 1 << 20
)

// batchSlots is how many in-flight slots batch takes: one per started
// inFlightSlotBytes of its commands, between 1 and MaxInFlight.
func batchSlots(batch []*item) int {
	size := 0
	for _, it := range batch {
		size += len(it.data)
	}
	return min(MaxInFlight, max(1, (size+inFlightSlotBytes-1)/inFlightSlotBytes))
}

type item struct {
	data     []byte
	deadline time.Time
	// omitResult asks the leader to leave a successful answer's record
	// data and error out: the sender has them. A completion's answer
	// would otherwise carry its result back to the node that just sent
	// it, and every result would cross the network twice.
	omitResult bool
	result     chan outcome
}

type outcome struct {
	resp fsm.Response
	err  error
}

// Dialer opens forward streams: DialStream connects to a leader's address
// and upgrades the connection to a stream of peer.StreamProtocol, as a peer call
// (the cluster key, node TLS, the node protocol version). Its errors say
// that nothing was sent (peer.ErrNotSent), or that the leader refused this
// node as a member (peer.ErrRefused).
type Dialer interface {
	DialStream(ctx context.Context, addr string) (net.Conn, *bufio.Reader, error)
}

// Observer is told of every batch a Forwarder finishes: its size and
// round trip, and each of its commands that got no response.
type Observer interface {
	Batch(commands int, took time.Duration)
	Failed(err error)
}

// New returns a Forwarder that opens its streams through d and tells o of
// its batches; Close stops it.
func New(d Dialer, o Observer) *Forwarder {
	f := &Forwarder{
		dial:    d,
		obs:     o,
		queues:  make(map[string][]*item),
		streams: make(map[string]*streamSlot),
		wake:    make(chan struct{}, 1),
		sem:     make(chan struct{}, MaxInFlight),
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	go f.dispatch()
	return f
}

// Close stops the forwarder: callers waiting for an answer get
// store.ErrCommitUnknown, and its streams are closed.
// It is safe to call more than once.
func (f *Forwarder) Close() {
	f.cancel()
	// No slot is added once ctx has ended (streamTo), so the map is not
	// written while it is read here.
	f.mu.Lock()
	slots := f.streams
	f.mu.Unlock()
	for _, slot := range slots {
		slot.close()
	}
}

// Apply forwards one command to addr and waits for its result. A caller
// whose ctx ends first gets store.ErrCommitUnknown: the command may be on
// its way. With omitResult, a successful answer's record may come without
// its data and error (the sender has them).
func (f *Forwarder) Apply(ctx context.Context, addr string, data []byte, deadline time.Time, omitResult bool) (fsm.Response, error) {
	it := &item{data: data, deadline: deadline, omitResult: omitResult, result: make(chan outcome, 1)}
	f.mu.Lock()
	f.queues[addr] = append(f.queues[addr], it)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	select {
	case r := <-it.result:
		return r.resp, r.err
	case <-ctx.Done():
		return fsm.Response{}, fmt.Errorf("%w: %w", store.ErrCommitUnknown, ctx.Err())
	case <-f.ctx.Done():
		return fsm.Response{}, fmt.Errorf("%w: the node is shutting down", store.ErrCommitUnknown)
	}
}

// dispatch sends queued commands in batches.
func (f *Forwarder) dispatch() {
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-f.wake:
		}
		for {
			addr, batch := f.take()
			if batch == nil {
				break
			}
			for range batchSlots(batch) {
				select {
				case f.sem <- struct{}{}:
				case <-f.ctx.Done():
					return
				}
			}
			go f.send(addr, batch)
		}
	}
}

// take removes the next batch of one address from the queues: the first
// items, up to MaxBatch of them and MaxBatchBytes of commands together;
// an item larger than MaxBatchBytes goes alone.
func (f *Forwarder) take() (string, []*item) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for addr, q := range f.queues {
		n := batchLen(q)
		batch := q[:n:n]
		if n == len(q) {
			delete(f.queues, addr)
		} else {
			f.queues[addr] = q[n:]
		}
		return addr, batch
	}
	return "", nil
}

// batchLen is how many of q's first items go in one batch (at least one).
func batchLen(q []*item) int {
	n, size := 0, 0
	for n < len(q) && n < MaxBatch {
		size += len(q[n].data)
		if n > 0 && size > MaxBatchBytes {
			break
		}
		n++
	}
	return n
}

// send sends batch to addr over the forward stream to addr (the stream's
// reader then delivers the answer and frees the batch's slot).
func (f *Forwarder) send(addr string, batch []*item) {
	// The leader bounds each apply by its own LeaderWait; allow for it.
	deadline := batch[0].deadline
	for _, it := range batch[1:] {
		if it.deadline.After(deadline) {
			deadline = it.deadline
		}
	}
	deadline = deadline.Add(2 * time.Second)
	if err := f.sendStream(addr, batch, deadline); err != nil {
		// Nothing of the batch was sent.
		f.finish(addr, batch, nil, err, time.Now())
		f.release(batch)
	}
}

// release frees the in-flight slots of a batch that has its answer.
func (f *Forwarder) release(batch []*item) {
	for range batchSlots(batch) {
		<-f.sem
	}
}

// finish gives every command of batch its outcome: err for all when it is
// not nil (the batch failed whole), else each one's of results, which
// must hold one per command (one short is an unknown outcome for all).
func (f *Forwarder) finish(addr string, batch []*item, results []peer.Result, err error, start time.Time) {
	f.obs.Batch(len(batch), time.Since(start))
	if err == nil && len(results) != len(batch) {
		err = &outcomeUnknownError{addr: addr, cause: fmt.Errorf("%d results for %d commands", len(results), len(batch))}
	}
	for i, it := range batch {
		var r outcome
		switch {
		case err != nil:
			// Not sent, not the leader, refused as a member: nothing
			// was applied. Otherwise, outcome unknown.
			r.err = err
		case results[i].IsError():
			r.err = results[i].Err()
		case results[i].Response == nil:
			r.err = fmt.Errorf("%w: %s answered no response", store.ErrCommitUnknown, addr)
		default:
			r.resp = *results[i].Response
		}
		if r.err != nil {
			f.obs.Failed(r.err)
		}
		it.result <- r
	}
}

// outcomeUnknownError is a forwarded batch that was sent and failed whole.
// It matches store.ErrCommitUnknown and nothing else: its cause is told
// in the message but deliberately not wrapped, since a failure of the
// batch (a broken stream, an answer that cannot be read) says nothing of
// each command, and a caller that took it for a refusal of its own
// command would stop trying to record an outcome that was never recorded.
type outcomeUnknownError struct {
	addr  string
	cause error
}

func (e *outcomeUnknownError) Error() string {
	return fmt.Sprintf("%v: forwarding to %s: %v", store.ErrCommitUnknown, e.addr, e.cause)
}

func (e *outcomeUnknownError) Unwrap() error { return store.ErrCommitUnknown }
