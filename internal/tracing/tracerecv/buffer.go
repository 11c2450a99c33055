// Package tracerecv is an OTLP/HTTP trace receiver for a person at a
// terminal: Handler takes POST /v1/traces as an OpenTelemetry exporter
// sends it, and Buffer keeps the spans grouped by trace, within bounds, so
// that `carmy traces` can print each trace once it is complete and write
// them all as Jaeger JSON.
package tracerecv

import (
	"slices"
	"sync"
	"time"

	"github.com/carmyhq/carmy/internal/tracing/otlpread"
)

// Span is a received span with the resource (the process) that sent it.
type Span struct {
	otlpread.Span
	// Resource is the resource's attributes (service.name…), shared by
	// the spans of one export: read it, do not change it.
	Resource []otlpread.KeyValue
	// Scope is the instrumentation scope that made the span.
	Scope otlpread.Scope
}

// Trace is the spans of one trace received so far, in the order they
// were received.
type Trace struct {
	ID    otlpread.TraceID
	Spans []Span
	// First and Last are when its first and its latest span arrived.
	First, Last time.Time
}

// Limits bound a Buffer's memory.
type Limits struct {
	// Traces is how many traces are kept; beyond it the oldest (by first
	// span received) are evicted.
	Traces int
	// Spans is how many spans are kept in all; beyond it the oldest traces
	// are evicted, and a span that would pass it on its own trace alone
	// is dropped.
	Spans int
}

// DefaultLimits are the limits of `carmy traces`: a few hundred MB at
// most for large spans, a few MB for Carmy's.
var DefaultLimits = Limits{Traces: 1000, Spans: 100_000}

// Buffer keeps the traces received, bounded by its Limits. Safe for
// concurrent use.
type Buffer struct {
	lim Limits
	now func() time.Time

	mu      sync.Mutex
	traces  map[otlpread.TraceID]*entry
	order   []otlpread.TraceID // by first span received, oldest first
	spans   int
	evicted int
	dropped int
}

type entry struct {
	Trace
	pending bool // received spans not yet handed out by Quiet
}

// NewBuffer returns an empty buffer bounded by lim (a zero field takes
// DefaultLimits'); now is the clock (time.Now when nil).
func NewBuffer(lim Limits, now func() time.Time) *Buffer {
	if lim.Traces <= 0 {
		lim.Traces = DefaultLimits.Traces
	}
	if lim.Spans <= 0 {
		lim.Spans = DefaultLimits.Spans
	}
	if now == nil {
		now = time.Now
	}
	return &Buffer{lim: lim, now: now, traces: map[otlpread.TraceID]*entry{}}
}

// Add keeps the spans of req, and returns how many it dropped (their
// trace alone would pass Limits.Spans).
func (s *Buffer) Add(req *otlpread.Request) (dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, rs := range req.Resources {
		for _, ss := range rs.Scopes {
			for _, sp := range ss.Spans {
				if !s.add(Span{Span: sp, Resource: rs.Attributes, Scope: ss.Scope}, now) {
					dropped++
				}
			}
		}
	}
	s.dropped += dropped
	return dropped
}

// add keeps one span, evicting the oldest other traces as the limits
// require; false if it was dropped. s.mu is held.
func (s *Buffer) add(sp Span, now time.Time) bool {
	e := s.traces[sp.TraceID]
	if e == nil {
		e = &entry{Trace: Trace{ID: sp.TraceID, First: now}}
		s.traces[sp.TraceID] = e
		s.order = append(s.order, sp.TraceID)
	}
	for len(s.traces) > s.lim.Traces || s.spans+1 > s.lim.Spans {
		if !s.evictOldest(sp.TraceID) {
			break
		}
	}
	if s.spans+1 > s.lim.Spans {
		if len(e.Spans) == 0 {
			s.remove(sp.TraceID)
		}
		return false
	}
	e.Spans = append(e.Spans, sp)
	e.Last, e.pending = now, true
	s.spans++
	return true
}

// evictOldest removes the oldest trace but keep; false if there is none
// other. s.mu is held.
func (s *Buffer) evictOldest(keep otlpread.TraceID) bool {
	for _, id := range s.order {
		if id != keep {
			s.remove(id)
			s.evicted++
			return true
		}
	}
	return false
}

// remove forgets the trace id. s.mu is held.
func (s *Buffer) remove(id otlpread.TraceID) {
	if e := s.traces[id]; e != nil {
		s.spans -= len(e.Spans)
		delete(s.traces, id)
		s.order = slices.DeleteFunc(s.order, func(o otlpread.TraceID) bool { return o == id })
	}
}

// Quiet returns, oldest first, a copy of each trace that received spans
// since it was last returned and none for quiet: the traces that look
// complete. A trace that receives more spans later is returned again,
// whole.
func (s *Buffer) Quiet(quiet time.Duration) []Trace {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []Trace
	for _, id := range s.order {
		e := s.traces[id]
		if e.pending && now.Sub(e.Last) >= quiet {
			e.pending = false
			out = append(out, e.copy())
		}
	}
	return out
}

// Traces returns a copy of every trace kept, oldest first.
func (s *Buffer) Traces() []Trace {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Trace, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.traces[id].copy())
	}
	return out
}

// Stats says how many spans the buffer keeps, how many traces it evicted
// and how many spans it dropped since it was made.
type Stats struct {
	Traces, Spans, Evicted, Dropped int
}

// Stats returns the buffer's counts.
func (s *Buffer) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Traces: len(s.traces), Spans: s.spans, Evicted: s.evicted, Dropped: s.dropped}
}

func (e *entry) copy() Trace {
	t := e.Trace
	t.Spans = slices.Clone(e.Spans)
	return t
}
