package tracing

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Exporter sends a batch of ended spans somewhere (package tracing/otlp's
// over OTLP/HTTP). Export is called by one goroutine at a time, and must
// not keep spans or the records they point to once it returns.
type Exporter interface {
	Export(ctx context.Context, spans []*Record) error
}

// The batching defaults: OpenTelemetry's batch span processor's, but a
// larger queue.
const (
	DefaultScheduleDelay      = 5 * time.Second
	DefaultExportTimeout      = 30 * time.Second
	DefaultMaxQueueSize       = 8192
	DefaultMaxExportBatchSize = 512
)

// dropReportEvery is how often at most the spans dropped by a full queue
// are logged.
const dropReportEvery = 10 * time.Second

// Options configure a Provider; a zero field takes its default.
type Options struct {
	// Sampler decides which spans are recorded (parentbased_always_on).
	Sampler Sampler
	// ScheduleDelay is the longest an ended span waits in the queue
	// before its batch is exported.
	ScheduleDelay time.Duration
	// ExportTimeout bounds one export.
	ExportTimeout time.Duration
	// MaxQueueSize is how many ended spans wait at most for export; a
	// span ended while the queue is full is dropped.
	MaxQueueSize int
	// MaxExportBatchSize is the most spans of one export; a batch is
	// exported as soon as it is full. At most MaxQueueSize.
	MaxExportBatchSize int
	// Log is told of a batch not exported and, at most every ten
	// seconds, of spans dropped; nil discards.
	Log *slog.Logger
}

// withDefaults returns o with its zero fields at their defaults.
func (o Options) withDefaults() Options {
	if o.ScheduleDelay <= 0 {
		o.ScheduleDelay = DefaultScheduleDelay
	}
	if o.ExportTimeout <= 0 {
		o.ExportTimeout = DefaultExportTimeout
	}
	if o.MaxQueueSize <= 0 {
		o.MaxQueueSize = DefaultMaxQueueSize
	}
	if o.MaxExportBatchSize <= 0 {
		o.MaxExportBatchSize = DefaultMaxExportBatchSize
	}
	o.MaxExportBatchSize = min(o.MaxExportBatchSize, o.MaxQueueSize)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// Provider makes the spans of tracing on (Use): it samples them, queues
// the recorded ones as they end, and a goroutine of its own exports them
// in batches. Ending a span never waits: a full queue drops it, counted
// (Dropped).
type Provider struct {
	opts     Options
	exp      Exporter
	queue    chan *Span
	dropped  atomic.Uint64
	base     context.Context // the exports', cancelled when Shutdown gives up
	cancel   context.CancelFunc
	stopping chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// NewProvider returns a provider exporting to exp as opts say, its
// batching goroutine started; Shutdown stops it.
func NewProvider(exp Exporter, opts Options) *Provider {
	opts = opts.withDefaults()
	base, cancel := context.WithCancel(context.Background())
	p := &Provider{
		opts: opts, exp: exp,
		queue: make(chan *Span, opts.MaxQueueSize),
		base:  base, cancel: cancel,
		stopping: make(chan struct{}), done: make(chan struct{}),
	}
	go p.run()
	return p
}

// Dropped is how many ended spans were dropped because the queue was full.
func (p *Provider) Dropped() uint64 { return p.dropped.Load() }

// Shutdown exports the spans still queued and stops the provider; spans
// ended after it are not exported. It returns once they are exported, or
// with ctx's error when ctx ends first (the export under way is then
// cancelled).
func (p *Provider) Shutdown(ctx context.Context) error {
	p.stopOnce.Do(func() { close(p.stopping) })
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		p.cancel()
		return fmt.Errorf("tracing: spans not flushed: %w", ctx.Err())
	}
}

// start starts a span named name of kind, child of parent (the zero
// context for a root), in ctx.
func (p *Provider) start(ctx context.Context, parent trace.SpanContext, name string, kind trace.SpanKind) (context.Context, *Span) {
	cfg := trace.SpanContextConfig{SpanID: newSpanID()}
	if parent.IsValid() {
		cfg.TraceID, cfg.TraceState = parent.TraceID(), parent.TraceState()
	} else {
		cfg.TraceID = newTraceID()
	}
	s := &Span{}
	if p.opts.Sampler.Sample(parent, cfg.TraceID) {
		cfg.TraceFlags = trace.FlagsSampled
		s.p = p
		s.rec.Parent, s.rec.ParentRemote = parent.SpanID(), parent.IsRemote()
		s.rec.Name, s.rec.Kind = name, kind
		s.rec.Attributes = s.attrs[:0]
		s.rec.Start = time.Now()
	}
	s.rec.Context = trace.NewSpanContext(cfg)
	return context.WithValue(ctx, spanKey{}, s), s
}

// enqueue hands an ended span to the batcher, or drops it when the queue
// is full.
func (p *Provider) enqueue(s *Span) {
	select {
	case p.queue <- s:
	default:
		p.dropped.Add(1)
	}
}

// run is the batcher: it exports a batch when it is full, when the
// schedule delay has passed since the last export, and at Shutdown what
// the queue still holds.
func (p *Provider) run() {
	defer close(p.done)
	batch := make([]*Record, 0, p.opts.MaxExportBatchSize)
	timer := time.NewTimer(p.opts.ScheduleDelay)
	defer timer.Stop()
	var reported uint64
	var reportedAt time.Time
	for {
		select {
		case s := <-p.queue:
			if batch = append(batch, &s.rec); len(batch) < cap(batch) {
				continue
			}
		case <-timer.C:
		case <-p.stopping:
			for {
				select {
				case s := <-p.queue:
					if batch = append(batch, &s.rec); len(batch) == cap(batch) {
						batch = p.export(batch)
					}
				default:
					p.export(batch)
					p.reportDrops(reported, time.Time{})
					return
				}
			}
		}
		batch = p.export(batch)
		reported, reportedAt = p.reportDrops(reported, reportedAt)
		timer.Reset(p.opts.ScheduleDelay)
	}
}

// export exports batch, logs a failure, and returns batch emptied.
func (p *Provider) export(batch []*Record) []*Record {
	if len(batch) == 0 {
		return batch
	}
	ctx, cancel := context.WithTimeout(p.base, p.opts.ExportTimeout)
	err := p.exp.Export(ctx, batch)
	cancel()
	if err != nil {
		if errors.Is(err, context.Canceled) && p.base.Err() != nil {
			err = fmt.Errorf("%w (shutdown gave up waiting)", err)
		}
		p.opts.Log.Warn("tracing: spans not exported", slog.Int("spans", len(batch)), slog.Any("err", err))
	}
	clear(batch)
	return batch[:0]
}

// reportDrops logs the spans dropped since reported (the count when last
// logged), unless the last report was less than dropReportEvery before;
// it returns the count and time of the last report.
func (p *Provider) reportDrops(reported uint64, at time.Time) (uint64, time.Time) {
	n := p.dropped.Load()
	if n == reported || time.Since(at) < dropReportEvery {
		return reported, at
	}
	p.opts.Log.Warn("tracing: spans dropped, the export queue was full",
		slog.Uint64("dropped", n-reported), slog.Uint64("dropped_total", n), slog.Int("queue", p.opts.MaxQueueSize))
	return n, time.Now()
}

// newTraceID is a random trace id, never the invalid zero one.
func newTraceID() trace.TraceID {
	for {
		var id trace.TraceID
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
		if id.IsValid() {
			return id
		}
	}
}

// newSpanID is a random span id, never the invalid zero one.
func newSpanID() trace.SpanID {
	for {
		var id trace.SpanID
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
		if id.IsValid() {
			return id
		}
	}
}
