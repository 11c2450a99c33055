package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/carmyhq/carmy/internal/egress"
)

// Probe returns the reconcile probe of h's ReconcileURL (nil when it has
// none): a GET of the URL with the execution's values put in, sent as the
// tool's own requests are (its headers and Carmy's, the egress policy, no
// redirect followed). 200 with a JSON body: found, the body is the data;
// 404: not found; anything else, or no answer: undecided.
//
// A value is put in escaped so that it stays within its path segment or
// query value (see probeURL.expand), and a request whose URL would not
// have the template's shape is not sent (undecided). The URL's host is
// checked against the egress policy now when it is an IP address (a name
// is checked when the probe connects, as the tool's own host is), unless
// h.Client brings a Transport of its own. An error names what is wrong
// with the URL, naming it without its userinfo or query.
func (h HTTPTool) Probe() (ProbeFunc, error) {
	if h.ReconcileURL == "" {
		return nil, nil
	}
	t, err := h.build()
	if err != nil {
		return nil, err
	}
	p, err := parseProbeURL(h.ReconcileURL)
	if err != nil {
		return nil, err
	}
	if h.Client == nil || h.Client.Transport == nil {
		if err := p.checkEgress(h.AllowNetworks); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, c ProbeCall) (ProbeAnswer, error) { return t.probe(ctx, p, c) }, nil
}

// probe asks the upstream about c.
func (t *httpTool) probe(ctx context.Context, p *probeURL, c ProbeCall) (ProbeAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.expand(c), nil)
	if err != nil {
		return ProbeAnswer{}, errors.New("the probe's request could not be built")
	}
	if err := p.check(req.URL); err != nil {
		t.log.Warn("http tool: reconcile probe: not sent", slog.String("tool", c.Tool), slog.String("execution_id", c.ExecutionID),
			slog.String("reason", err.Error()))
		return ProbeAnswer{}, fmt.Errorf("not sent: %w", err)
	}
	call := Call{Tool: c.Tool, RequestID: c.RequestID, IdempotencyKey: c.IdempotencyKey, FencingToken: c.FencingToken, ExecutionID: c.ExecutionID}
	req.Header = t.header(call, true)
	req.Header.Del("Content-Type")
	client := t.base
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		t.log.Warn("http tool: reconcile probe: no answer", slog.String("tool", c.Tool), slog.String("execution_id", c.ExecutionID),
			slog.String("err", egress.Detail(err, t.redactor)))
		return ProbeAnswer{}, fmt.Errorf("the probe got no answer: %s", egress.Describe(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody+1))
	switch {
	case err != nil:
		return ProbeAnswer{}, fmt.Errorf("reading the probe's answer failed: %s", egress.Describe(err))
	case len(body) > maxUpstreamBody:
		return ProbeAnswer{}, fmt.Errorf("the probe answered more than %d bytes", maxUpstreamBody)
	case resp.StatusCode == http.StatusNotFound:
		return ProbeAnswer{Found: false}, nil
	case resp.StatusCode != http.StatusOK:
		return ProbeAnswer{}, fmt.Errorf("the probe answered %d", resp.StatusCode)
	}
	trimmed := strings.TrimSpace(string(body))
	if !isJSONType(resp.Header.Get("Content-Type")) || !json.Valid([]byte(trimmed)) {
		return ProbeAnswer{}, errors.New("the probe answered 200 without a JSON body")
	}
	data, _ := t.redactor.RedactJSON([]byte(trimmed))
	return ProbeAnswer{Found: true, Data: json.RawMessage(data)}, nil
}
