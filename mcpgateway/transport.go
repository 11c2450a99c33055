package mcpgateway

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/egress"
)

// callKey is the context key of the *callState a request to an upstream
// is made for.
type callKey struct{}

// withCall returns ctx carrying st, so that the HTTP request made for it
// gets its call's headers, and a transport can mark its answer too large.
func withCall(ctx context.Context, st *callState) context.Context {
	return context.WithValue(ctx, callKey{}, st)
}

// httpClient returns the client of an HTTP upstream: through the egress
// policy, following no redirect (the request fails with the redirect's
// status, as an HTTP tool's does by default), with the configured headers
// on every request and Carmy's on the requests made for a call, reading
// at most maxAnswer bytes of a body or of one SSE event.
func httpClient(headers map[string]string, allow []netip.Prefix, maxAnswer int) (*http.Client, error) {
	policy, err := egress.New(allow)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Transport: &headerTransport{base: policy.Transport(), headers: maps.Clone(headers), maxAnswer: maxAnswer},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, nil
}

// headerTransport adds headers to every request and bounds every answer.
type headerTransport struct {
	base      http.RoundTripper
	headers   map[string]string
	maxAnswer int
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		// The transport's own headers (Content-Type, Accept,
		// Mcp-Session-Id, Mcp-Protocol-Version) win.
		if req.Header.Get(k) == "" {
			req.Header.Set(k, v)
		}
	}
	st, _ := req.Context().Value(callKey{}).(*callState)
	if st != nil {
		if st.call.ExecutionID != "" { // not a forwarded read (passthrough.go)
			// As an HTTP tool sends them (docs/config.md#http-tools); nothing overrides them.
			engine.SetCallHeaders(req.Header, st.call)
		}
		req = st.traceSend(req)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if st != nil && refusedSession(req, resp) {
		st.sessionGone.Store(true)
	}
	boundBody(req, resp, t.maxAnswer, func() {
		if st != nil {
			st.tooLarge.Store(true)
		}
	})
	return resp, nil
}

// lineLogger logs what a child writes to its stderr, a line at a time.
type lineLogger struct {
	log *slog.Logger
	buf []byte
}

// maxStderrLine bounds one logged line of a child's stderr.
const maxStderrLine = 4 << 10

func (l *lineLogger) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		adv, line, err := bufio.ScanLines(l.buf, false)
		if err != nil || adv == 0 {
			break
		}
		l.buf = l.buf[adv:]
		l.log.Info("mcp server: stderr", slog.String("line", clip(string(line))))
	}
	if len(l.buf) > maxStderrLine {
		l.log.Info("mcp server: stderr", slog.String("line", clip(string(l.buf))))
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

var _ io.Writer = (*lineLogger)(nil)
