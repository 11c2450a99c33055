package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/carmyhq/carmy/internal/buildinfo"
	"github.com/carmyhq/carmy/internal/tracing"
)

// Exporter is a tracing.Exporter that posts spans over OTLP/HTTP in
// binary protobuf, one request per batch (of the Config's Resource),
// retried as send says. It is safe for concurrent use.
type Exporter struct {
	cfg    Config
	where  string // the URL without userinfo or query, for errors
	client *http.Client
	agent  string
	gz     sync.Pool // *gzip.Writer
	closed atomic.Bool
	// perSpan is the bytes per span of the last export's body, to size
	// the next one's in one allocation.
	perSpan atomic.Int64
}

// firstPerSpan is the bytes per span the first export's body is sized
// for: a call's span (six attributes) takes about 250.
const firstPerSpan = 256

var _ tracing.Exporter = (*Exporter)(nil)

// errShutdown is Export's answer once Shutdown was called.
var errShutdown = errors.New("tracing: the OTLP exporter is shut down")

// NewExporter returns the exporter cfg describes, for a
// tracing.Provider.
func NewExporter(cfg Config) (*Exporter, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("tracing: the OTLP exporter needs an http:// or https:// URL")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLS != nil {
		transport.TLSClientConfig = cfg.TLS.Clone()
	}
	return &Exporter{
		cfg:    cfg,
		where:  u.Scheme + "://" + u.Host + u.EscapedPath(),
		client: &http.Client{Transport: transport},
		agent:  "carmy/" + buildinfo.Version(),
	}, nil
}

// Export sends spans to the receiver in one request, gzipped when
// the Config says so, and retries it while the receiver answers that it
// is busy (send), all within the Config's Timeout and ctx. An error
// means the batch was not (or not wholly) accepted; the spans are not
// kept for another try.
func (e *Exporter) Export(ctx context.Context, spans []*tracing.Record) error {
	if e.closed.Load() {
		return errShutdown
	}
	if len(spans) == 0 {
		return nil
	}
	per := e.perSpan.Load()
	if per == 0 {
		per = firstPerSpan
	}
	body := AppendRequest(make([]byte, 0, int(per+per/8)*len(spans)+256), e.cfg.Resource, spans)
	e.perSpan.Store(int64(len(body)/len(spans) + 1))
	if e.cfg.Gzip {
		var err error
		if body, err = e.compress(body); err != nil {
			return fmt.Errorf("tracing: compressing %d spans: %w", len(spans), err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	if err := e.send(ctx, body); err != nil {
		return fmt.Errorf("tracing: %d spans not exported to %s: %w", len(spans), e.where, err)
	}
	return nil
}

// compress returns body gzipped.
func (e *Exporter) compress(body []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(body) / 4)
	w, _ := e.gz.Get().(*gzip.Writer)
	if w == nil {
		w = gzip.NewWriter(&buf)
	} else {
		w.Reset(&buf)
	}
	defer e.gz.Put(w)
	if _, err := w.Write(body); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Shutdown stops the exporter: Export fails from then on. Call it once
// the provider has flushed its spans through Export (its Shutdown).
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.closed.Store(true)
	e.client.CloseIdleConnections()
	return ctx.Err()
}
