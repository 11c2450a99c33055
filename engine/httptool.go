package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/carmyhq/carmy/internal/egress"
	"github.com/carmyhq/carmy/internal/tracing"
)

// Error codes an HTTP tool records (docs/config.md#http-tools). Their messages name the
// tool and the kind of failure, never the configured URL, a header value
// or a secret.
const (
	// CodeUpstreamStatus: the upstream answered with a status outside
	// 2xx, a redirect not followed included. The error carries "status"
	// and the start of the answer's body as "body" (configured values the
	// upstream echoed are redacted).
	CodeUpstreamStatus = "UPSTREAM_STATUS"
	// CodeUpstreamUnreachable: no answer could be had or read (a refused
	// connection, a failed DNS lookup or TLS handshake, a dropped
	// connection). The request may have reached the upstream when the
	// connection dropped after it was sent.
	CodeUpstreamUnreachable = "UPSTREAM_UNREACHABLE"
	// CodeEgressDenied: the egress policy refused every address of the
	// upstream before connecting; nothing was sent.
	CodeEgressDenied = "EGRESS_DENIED"
	// CodeUpstreamToolError: an upstream MCP server answered the call with
	// a tool error (isError: true) or a JSON-RPC error (docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway); the
	// message holds its text.
	CodeUpstreamToolError = "UPSTREAM_TOOL_ERROR"
)

// HTTPTool configures a tool that calls an upstream over HTTP (docs/config.md#http-tools).
//
// The URL, the headers and whatever secrets they hold never appear in a
// record or an answer: a failure is recorded as the tool's name and the
// kind of failure, and its detail is logged (with the URL's userinfo and
// query, and the configured values, redacted).
type HTTPTool struct {
	URL string
	// Method defaults to POST.
	Method  string
	Headers map[string]string
	// FollowRedirects lets the tool follow a redirect to the same scheme,
	// host and port as URL (up to 10 of them), sending Carmy's headers but
	// none of Headers, nor URL's userinfo. A redirect elsewhere, or any
	// redirect when FollowRedirects is off (the default), is not followed:
	// the tool fails with UPSTREAM_STATUS and the redirect's status.
	FollowRedirects bool
	// AllowNetworks, when not empty, lists the only networks the tool may
	// connect to. With or without it, the egress policy's deny list
	// (unspecified, link-local and cloud metadata addresses; see package
	// internal/egress) is refused unless a network of AllowNetworks names
	// such an address at least as narrowly. The check is made on every
	// address the upstream's name resolves to, before connecting; a
	// refusal fails with EGRESS_DENIED.
	AllowNetworks []netip.Prefix
	// Client defaults to a client with no timeout of its own: the tool's
	// timeout bounds every request through its context. A Client without
	// a Transport gets the one that applies the egress policy; with a
	// Transport of its own, AllowNetworks and the deny list are the
	// Transport's to enforce. The tool's redirect rule replaces the
	// Client's CheckRedirect either way.
	Client *http.Client
	// Logger receives a failure's detail at WARN (nil: slog.Default()).
	Logger *slog.Logger
	// ReconcileURL, when set, is the URL of the tool's reconcile probe
	// (docs/config.md#reconcile-probes; Probe): a GET with the tool's headers, in which
	// {idempotency_key}, {execution_id}, {request_id} and {fencing_token}
	// are replaced by the execution's, only in the path or the query: in
	// the path every byte but ALPHA, DIGIT, "-", "_" and "~" is
	// percent-encoded ("." too), in the query a value is query escaped,
	// so that a value never leaves its segment or parameter.
	ReconcileURL string

	// control, when set (by tests), runs after the egress policy accepted
	// an address and before the connection is made.
	control func(network, address string, c syscall.RawConn) error
}

// maxUpstreamBody bounds how much of an upstream answer is read.
const maxUpstreamBody = 8 << 20

// maxErrorBody bounds the upstream text kept in a failed result.
const maxErrorBody = 1 << 10

// maxRedactedBody bounds the start of a failed answer that is redacted
// before it is cut to maxErrorBody.
const maxRedactedBody = 64 << 10

// maxRedirects bounds the redirects a tool with FollowRedirects follows.
const maxRedirects = 10

// Func returns the ToolFunc that sends the call's arguments as the JSON
// body, with the Idempotency-Key, Carmy-Execution-Id, Carmy-Request-Id and
// Carmy-Fencing-Token headers. A 2xx answer is the result: its JSON when
// the answer is JSON (by Content-Type, or valid JSON without one), else
// {"body": text}, with the configured values (the URL's userinfo and
// query values, the headers' values) it echoes replaced by "[redacted]":
// in the decoded text of its strings when it is JSON, however they were
// escaped, else in its text and the forms encoders commonly give them
// (see egress.Redactor). Any other status fails with UPSTREAM_STATUS, an address
// the egress policy refuses with EGRESS_DENIED, a request that gets no
// answer with UPSTREAM_UNREACHABLE; the end of the tool's context is
// returned as its error (timed_out or cancelled). It calls MarkSent once
// the first byte of the request is written: register it with
// ToolSpec.MarksSent.
//
// Func checks the configuration: an error names what is wrong without
// repeating the URL or a header's value.
func (h HTTPTool) Func() (ToolFunc, error) {
	t, err := h.build()
	if err != nil {
		return nil, err
	}
	return t.call, nil
}

// build checks h and returns the tool it describes.
func (h HTTPTool) build() (*httpTool, error) {
	u, err := url.Parse(h.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Neither the URL nor url.Parse's error, which quotes it.
		return nil, errors.New("http tool: the url is not an absolute http or https URL")
	}
	method := h.Method
	if method == "" {
		method = http.MethodPost
	}
	if _, err := http.NewRequest(method, h.URL, nil); err != nil {
		return nil, fmt.Errorf("http tool: method %q: not a valid HTTP method", method)
	}
	policy, err := egress.New(h.AllowNetworks)
	if err != nil {
		return nil, fmt.Errorf("http tool: %w", err)
	}
	base := http.Client{}
	if h.Client != nil {
		base = *h.Client
	}
	if base.Transport == nil {
		base.Transport = h.transport(policy)
	}
	h.Headers = maps.Clone(h.Headers) // the caller may change its map later
	t := &httpTool{
		HTTPTool:  h,
		traceable: egress.Traceable(base.Transport),
		url:       u,
		method:    method,
		base:      base,
		redactor:  egress.NewRedactor(u, h.Headers),
		logURL:    egress.RedactURL(u),
		log:       h.Logger,
	}
	if t.log == nil {
		t.log = slog.Default()
	}
	return t, nil
}

// transport returns the egress policy's transport, with the test hook.
func (h HTTPTool) transport(policy *egress.Policy) *http.Transport {
	tr := policy.Transport()
	if h.control != nil {
		d := policy.Dialer()
		check := d.Control
		d.Control = func(network, address string, c syscall.RawConn) error {
			if err := check(network, address, c); err != nil {
				return err
			}
			return h.control(network, address, c)
		}
		tr.DialContext = egress.CountWrites(d.DialContext)
	}
	return tr
}

// httpTool is an HTTPTool checked by Func.
type httpTool struct {
	HTTPTool
	// traceable: whether a request's connections are traced
	// (egress.TrackSend), so that "never sent" can be known.
	traceable bool
	url       *url.URL
	method    string
	base      http.Client
	redactor  *egress.Redactor
	logURL    string // the URL for the log, redacted
	log       *slog.Logger
}

func (t *httpTool) call(ctx context.Context, c Call) (any, error) {
	// The caller is told once a byte of the request is written (MarkSent);
	// through a transport that cannot tell, the request counts as sent.
	rctx, send := egress.TrackSendNotify(ctx, SentFunc(ctx))
	if !t.traceable {
		MarkSent(ctx)
	}
	req, err := http.NewRequestWithContext(rctx, t.method, t.URL, bytes.NewReader(c.Arguments))
	if err != nil {
		// Func built one already: this does not happen, but its text would
		// name the URL.
		t.warn(c, "the request could not be built", err)
		return nil, &ToolError{Code: CodeToolError, Message: fmt.Sprintf("tool %s: the request could not be built", c.Tool)}
	}
	req.Header = t.header(c, true)
	tracing.InjectHeader(ctx, req.Header) // the tool's span: the upstream joins the call's trace
	// net/http would send a call carrying an Idempotency-Key again by
	// itself after losing the connection it was written on: not so here.
	send.GuardResend(req)
	var refused string // why a redirect was not followed
	client := t.base
	client.CheckRedirect = func(next *http.Request, via []*http.Request) error {
		if refused = t.refuseRedirect(next, via); refused != "" {
			return http.ErrUseLastResponse
		}
		// Carmy's headers only: neither the configured ones, nor a Referer
		// (the configured URL), nor the basic auth of the URL's userinfo,
		// which a relative Location keeps.
		next.Header = t.header(c, false)
		tracing.InjectHeader(ctx, next.Header)
		next.URL.User = nil
		if next.Body == nil || next.Body == http.NoBody {
			next.Header.Del("Content-Type")
		}
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, t.failed(c, err, send)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		kind := egress.Describe(err)
		t.warn(c, "reading the upstream's answer failed: "+kind, err)
		return nil, &AnswerLostError{Reason: "reading the upstream's answer failed: " + kind, Err: err}
	}
	if len(body) > maxUpstreamBody {
		return nil, &ToolError{Code: CodeResultTooLarge, Message: fmt.Sprintf("the upstream answered more than %d bytes", maxUpstreamBody)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("tool %s: the upstream answered %s", c.Tool, t.redactor.Redact(resp.Status))
		if refused != "" {
			msg += ": a redirect, not followed: " + refused
			loc, _ := resp.Location()
			t.log.Warn("http tool: a redirect was not followed", slog.String("tool", c.Tool), slog.String("execution_id", c.ExecutionID),
				slog.String("url", t.logURL), slog.Int("status", resp.StatusCode), slog.String("location", egress.RedactURL(loc)),
				slog.String("reason", refused))
		}
		return nil, &ToolError{
			Code:    CodeUpstreamStatus,
			Message: msg,
			Details: map[string]any{"status": resp.StatusCode, "body": t.errorBody(body)},
		}
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && isJSONType(resp.Header.Get("Content-Type")) && json.Valid(trimmed) {
		data, _ := t.redactor.RedactJSON(trimmed)
		return json.RawMessage(data), nil
	}
	return map[string]string{"body": t.redactor.Redact(string(body))}, nil
}

// header returns the headers of a request for c: Content-Type and Accept
// (which configured headers may change), the configured headers when
// configured is set, and Carmy's own, which nothing overrides.
func (t *httpTool) header(c Call, configured bool) http.Header {
	h := make(http.Header)
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	if configured {
		for k, v := range t.Headers {
			h.Set(k, v)
		}
	}
	SetCallHeaders(h, c)
	return h
}

// SetCallHeaders sets the headers an upstream gets with a call so that it
// can deduplicate and fence too (docs/config.md#http-tools): Idempotency-Key,
// Carmy-Request-Id and Carmy-Fencing-Token for a recorded call, and
// Carmy-Execution-Id. HTTP tools and HTTP MCP upstreams both send them.
func SetCallHeaders(h http.Header, c Call) {
	if c.RequestID != "" {
		h.Set("Idempotency-Key", c.IdempotencyKey)
		h.Set("Carmy-Request-Id", c.RequestID)
		h.Set("Carmy-Fencing-Token", strconv.FormatUint(c.FencingToken, 10))
	}
	h.Set("Carmy-Execution-Id", c.ExecutionID)
}

// refuseRedirect returns why the redirect to next is not followed, or ""
// to follow it.
func (t *httpTool) refuseRedirect(next *http.Request, via []*http.Request) string {
	switch {
	case !sameOrigin(t.url, next.URL):
		return "it leads to another host, scheme or port"
	case !t.FollowRedirects:
		return "the tool does not follow redirects"
	case len(via) > maxRedirects: // via holds the first request too
		return fmt.Sprintf("%d redirects were followed already", maxRedirects)
	}
	return ""
}

// errorBody returns the start of a failed answer's body for the record,
// with the configured values it echoes redacted: in the decoded text of
// its strings when the body is JSON (however they were escaped), else in
// its text. Redaction comes before the cut, so that no part of a secret
// survives at the cut.
func (t *httpTool) errorBody(body []byte) string {
	if trimmed := bytes.TrimSpace(body); t.redactor != nil && json.Valid(trimmed) {
		red, _ := t.redactor.RedactJSON(trimmed)
		return truncate(red, maxErrorBody)
	}
	if len(body) > maxRedactedBody {
		body = body[:maxRedactedBody]
	}
	return truncate([]byte(t.redactor.Redact(string(body))), maxErrorBody)
}

// sameOrigin reports whether a and b have the same scheme, host and port
// (an absent port being the scheme's).
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// failed turns the error of a request that got no answer into the tool's
// error, and logs its detail: EGRESS_DENIED for an address the policy
// refused (recorded: the same call would be refused again); a
// *NotSentError when not one byte of the request was written (the
// connection was refused, the name did not resolve, the TLS handshake
// failed: the reservation is released); else an *AnswerLostError (the
// request was written, in part or whole: the execution is interrupted).
func (t *httpTool) failed(c Call, err error, send *egress.Send) error {
	if errors.Is(err, egress.ErrDenied) {
		t.warn(c, "the egress policy refused the upstream's address", err)
		return &ToolError{Code: CodeEgressDenied, Message: fmt.Sprintf("tool %s: the upstream's address is not allowed by the egress policy", c.Tool)}
	}
	kind := egress.Describe(err)
	if t.traceable && !send.Sent() {
		t.warn(c, "the upstream could not be reached, nothing was sent: "+kind, err)
		return &NotSentError{Reason: "the upstream could not be reached: " + kind, Err: err}
	}
	t.warn(c, "the request was sent, but no answer came: "+kind, err)
	return &AnswerLostError{Reason: "no answer came: " + kind, Err: err}
}

// warn logs a failure of c with its detail, redacted.
func (t *httpTool) warn(c Call, msg string, err error) {
	t.log.Warn("http tool: "+msg, slog.String("tool", c.Tool), slog.String("execution_id", c.ExecutionID),
		slog.String("url", t.logURL), slog.String("err", egress.Detail(err, t.redactor)))
}

// isJSONType reports whether a Content-Type announces JSON: absent,
// application/json, or any application/*+json.
func isJSONType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// truncate returns at most n bytes of b as text, cut at a rune boundary.
func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	b = b[:n]
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	return string(b) + "…"
}
