package mcpgateway

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/egress"
)

// callKey is the context key of the call a request to an HTTP upstream is
// made for.
type callKey struct{}

// withCall returns ctx carrying c, so that the HTTP request made for it
// gets c's headers.
func withCall(ctx context.Context, c engine.Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// httpClient returns the client of an HTTP upstream: through the egress
// policy, following no redirect (the request fails with the redirect's
// status, as an HTTP tool's does by default), with the configured headers
// on every request and Carmy's on the requests made for a call.
func httpClient(headers map[string]string, allow []netip.Prefix) (*http.Client, error) {
	policy, err := egress.New(allow)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Transport: &headerTransport{base: policy.Transport(), headers: maps.Clone(headers)},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, nil
}

// headerTransport adds headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
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
	if c, ok := req.Context().Value(callKey{}).(engine.Call); ok {
		// As an HTTP tool sends them (SPEC §3.1); nothing overrides them.
		engine.SetCallHeaders(req.Header, c)
	}
	return t.base.RoundTrip(req)
}

// stopChildAfter is how long a stdio child has to exit once its stdin is
// closed, before it is sent SIGTERM.
const stopChildAfter = 5 * time.Second

// command returns the transport of a new stdio child, whose stderr lines
// go to the log.
func (u *Upstream) command() mcp.Transport {
	cmd := exec.Command(u.cfg.Command[0], u.cfg.Command[1:]...)
	cmd.Stderr = &lineLogger{log: u.log}
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: stopChildAfter}
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
