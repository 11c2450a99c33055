package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/carmyhq/carmy/internal/egress"
)

// Probe returns the reconcile probe of h's ReconcileURL (nil when it has
// none): a GET of the URL with the execution's values put in, sent as the
// tool's own requests are (its headers and Carmy's, the egress policy, no
// redirect followed). 200 with a JSON body: found, the body is the data;
// 404: not found; anything else, or no answer: undecided. An error names
// what is wrong with the URL without repeating it.
func (h HTTPTool) Probe() (ProbeFunc, error) {
	if h.ReconcileURL == "" {
		return nil, nil
	}
	t, err := h.build()
	if err != nil {
		return nil, err
	}
	sample := expandProbeURL(h.ReconcileURL, ProbeCall{ExecutionID: "exec_x", RequestID: "r", IdempotencyKey: "k", FencingToken: 1})
	if u, err := url.Parse(sample); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("http tool: reconcile: the url is not an absolute http or https URL")
	}
	return t.probe, nil
}

// expandProbeURL puts c's values in place of the placeholders of tmpl,
// each escaped so that it stays one path segment or query value.
func expandProbeURL(tmpl string, c ProbeCall) string {
	return strings.NewReplacer(
		"{idempotency_key}", url.QueryEscape(c.IdempotencyKey),
		"{execution_id}", url.QueryEscape(c.ExecutionID),
		"{request_id}", url.QueryEscape(c.RequestID),
		"{fencing_token}", strconv.FormatUint(c.FencingToken, 10),
	).Replace(tmpl)
}

// probe asks the upstream about c.
func (t *httpTool) probe(ctx context.Context, c ProbeCall) (ProbeAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, expandProbeURL(t.ReconcileURL, c), nil)
	if err != nil {
		return ProbeAnswer{}, errors.New("the probe's request could not be built")
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
