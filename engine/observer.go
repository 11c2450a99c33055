package engine

import (
	"sync/atomic"
	"time"

	"github.com/carmyhq/carmy/store"
)

// Observer is told what the runtime does, for metrics. The runtime calls
// it from many goroutines at once, on the path of calls: its methods must
// be safe for concurrent use, quick, and must not block.
type Observer interface {
	// ToolFinished is called once per execution, when its tool returned
	// (or was abandoned at its timeout or cancellation), with the status
	// recorded for it and how long it ran.
	ToolFinished(tool string, status store.Status, took time.Duration)
	// StoreWrite is called after each store write of a call: op
	// StoreReserve with the outcome "reserved", "replay", "conflict",
	// "uncertain" or "error"; op StoreComplete with "ok" or "error".
	StoreWrite(op, outcome string, took time.Duration)
}

// RefusalObserver is implemented by Observers that also count the calls
// the runtime refused before reserving anything, by reason: the Limit of
// the *BusyError (LimitMaxRunning, LimitMaxRunningPerPrincipal,
// LimitAdminReserve). Refused is called on the path of calls, as the
// Observer's methods are.
type RefusalObserver interface {
	Refused(reason string)
}

// The store writes of a call, as StoreWrite names them.
const (
	StoreReserve  = "reserve"
	StoreComplete = "complete"
)

// observers tells several Observers, in order.
type observers []Observer

func (all observers) ToolFinished(tool string, status store.Status, took time.Duration) {
	for _, o := range all {
		o.ToolFinished(tool, status, took)
	}
}

func (all observers) Refused(reason string) {
	for _, o := range all {
		if ro, ok := o.(RefusalObserver); ok {
			ro.Refused(reason)
		}
	}
}

func (all observers) Probed(tool, outcome string) {
	for _, o := range all {
		if po, ok := o.(ProbeObserver); ok {
			po.Probed(tool, outcome)
		}
	}
}

func (all observers) ApprovalNotified(result string) {
	for _, o := range all {
		if no, ok := o.(NotifyObserver); ok {
			no.ApprovalNotified(result)
		}
	}
}

func (all observers) StoreWrite(op, outcome string, took time.Duration) {
	for _, o := range all {
		o.StoreWrite(op, outcome, took)
	}
}

// observerSet is the runtime's observers: its configuration's and those
// AddObserver added since, read on the path of calls without a lock. It
// is a RefusalObserver, a ProbeObserver and a NotifyObserver, telling those of its
// observers that are.
type observerSet struct {
	all atomic.Pointer[observers]
}

func newObserverSet(o Observer) *observerSet {
	s := &observerSet{}
	all := observers{}
	if o != nil {
		all = observers{o}
	}
	s.all.Store(&all)
	return s
}

// add appends o; the callers of add are serialised (Runtime.mu).
func (s *observerSet) add(o Observer) {
	all := append(observers{}, *s.all.Load()...)
	all = append(all, o)
	s.all.Store(&all)
}

func (s *observerSet) ToolFinished(tool string, status store.Status, took time.Duration) {
	s.all.Load().ToolFinished(tool, status, took)
}

func (s *observerSet) StoreWrite(op, outcome string, took time.Duration) {
	s.all.Load().StoreWrite(op, outcome, took)
}

func (s *observerSet) Refused(reason string) { s.all.Load().Refused(reason) }

func (s *observerSet) Probed(tool, outcome string) { s.all.Load().Probed(tool, outcome) }

func (s *observerSet) ApprovalNotified(result string) { s.all.Load().ApprovalNotified(result) }

// AddObserver adds o to the observers the runtime tells what it does, as
// WithObserver does, after the runtime was made: how a metrics package
// (package metrics/prom) attaches itself to a runtime built without it.
// It is safe at any time; what the runtime did before is not told to o,
// so add it before the first call. A nil o is ignored.
func (r *Runtime) AddObserver(o Observer) {
	if o == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observers.add(o)
}

// reserveOutcome names a Reserve outcome for StoreWrite.
func reserveOutcome(o store.Outcome, err error) string {
	if err != nil {
		return "error"
	}
	switch o {
	case store.Reserved:
		return "reserved"
	case store.Replay:
		return "replay"
	case store.Conflict:
		return "conflict"
	case store.Uncertain:
		return "uncertain"
	case store.Awaiting:
		return "awaiting"
	}
	return "error"
}

// noObserver observes nothing: a base for observers of one kind.
type noObserver struct{}

func (noObserver) ToolFinished(string, store.Status, time.Duration) {}
func (noObserver) StoreWrite(string, string, time.Duration)         {}
