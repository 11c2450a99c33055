package robustness

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/api/wire"
	"github.com/carmyhq/carmy/internal/mcpclient"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/internal/tlsmux"
	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
)

// Workload constants shared by the clients and the checks.
const (
	// toolName is the ledger tool of the test image's config.
	toolName = "ledger_write"
	// gatedToolName is the same tool behind an approval gate (approver
	// "approver", expiring after 15 s).
	gatedToolName = "ledger_write_gated"
	// session is the session every call uses (one principal: agent).
	session = "robustness"
	// callTimeout is how long a client waits for one answer: the leader
	// wait (5 s) plus the tool's timeout (2 s) plus slack. No answer by
	// then is an unknown outcome.
	callTimeout = 10 * time.Second
)

// errorBody is the error envelope of docs/errors.md.
type errorBody struct {
	Error struct {
		Code        string `json:"code"`
		Message     string `json:"message"`
		ExecutionID string `json:"execution_id"`
		Status      string `json:"status"`
	} `json:"error"`
}

// outcome is what one call came to.
type outcome struct {
	kind        Kind
	executionID string
	status      string
	replayed    bool
	result      string // KindOK: canonical encoding of the recorded outcome (status, data, error), the same over either transport
	stamps      string // KindOK over HTTP: the record's timestamps (MCP answers carry none)
	data        ledgerapi.Result
	hasData     bool
	httpStatus  int
	code        string // error code, when the answer was an error
	detail      string // what was unexpected, for anomalies
}

// nodeClient talks to carmy nodes over their published ports.
type nodeClient struct {
	hc  *http.Client
	key string
	// tokens authenticate the harness: calls and record reads as the
	// agent, decisions as the approver, administration as the admin.
	tokens runTokens
	// peerHC calls the peer endpoints as a node would: mutual TLS under
	// tlsmux.NodeServerName with the harness's certificate.
	peerHC *http.Client
}

// newNodeClient returns the harness's client; tlsDir holds the cluster CA
// (carmy-ca.pem) and the harness's certificate (harness.pem and its key).
func newNodeClient(t testing.TB, key, tlsDir string, tokens runTokens) *nodeClient {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, "harness.pem"), filepath.Join(tlsDir, "harness-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(tlsDir, "carmy-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tc := &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		ServerName: tlsmux.NodeServerName, NextProtos: []string{"http/1.1"},
		// Nodes are checked against the CA, not by name (as nodes do).
		InsecureSkipVerify: true, //nolint:gosec // verified below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			leaf, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			_, err = leaf.Verify(x509.VerifyOptions{Roots: pool})
			return err
		},
	}
	return &nodeClient{
		hc: &http.Client{Timeout: callTimeout}, key: key, tokens: tokens,
		peerHC: &http.Client{Timeout: callTimeout, Transport: &http.Transport{TLSClientConfig: tc}},
	}
}

// Transports of the workload's calls: POST /v1/tools/call, or tools/call
// at /mcp (docs/mcp.md) at one of the protocol versions below.
const (
	transportHTTP = "http"
	transportMCP  = "mcp"
)

// mcpVersions are the protocol versions of the workload's MCP calls:
// 2025-11-25, which Carmy's own fast path serves, and 2026-07-28 (with
// its _meta triple and Mcp-Method and Mcp-Name headers), which the SDK
// serves.
var mcpVersions = []string{mcpversion.V20251125, mcpversion.V20260728}

// callVia sends one call of tool over transport ("http", or
// "mcp/<version>").
func (c *nodeClient) callVia(ctx context.Context, transport, baseURL, tool, requestID string, args ledgerapi.Args) outcome {
	if version, ok := strings.CutPrefix(transport, transportMCP+"/"); ok {
		return c.callMCP(ctx, baseURL, version, tool, requestID, args)
	}
	return c.callTool(ctx, baseURL, tool, requestID, args)
}

// api returns a client of the node at baseURL that sends each request
// once (the workload retries by itself, and counts every attempt), through
// the harness's HTTP client, whose timeout (callTimeout) bounds it, with
// the agent's token: the workload's calls and the reads of its records.
func (c *nodeClient) api(baseURL string) (*client.Client, error) {
	return c.apiAs(baseURL, c.tokens.Agent)
}

// adminAPI is api with the admin's token: the cluster's administration.
func (c *nodeClient) adminAPI(baseURL string) (*client.Client, error) {
	return c.apiAs(baseURL, c.tokens.Admin)
}

func (c *nodeClient) apiAs(baseURL, token string) (*client.Client, error) {
	opts := []client.Option{client.WithHTTPClient(c.hc), client.WithRetry(client.NoRetry)}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	return client.New(baseURL, opts...)
}

// call sends one call of the ledger tool to baseURL and classifies the
// answer (callTool).
func (c *nodeClient) call(ctx context.Context, baseURL, requestID string, args ledgerapi.Args) outcome {
	return c.callTool(ctx, baseURL, toolName, requestID, args)
}

// callTool sends one call of tool to baseURL and classifies the answer.
// An answer that fits no kind of the contract is KindUnknown with detail
// set.
func (c *nodeClient) callTool(ctx context.Context, baseURL, tool, requestID string, args ledgerapi.Args) outcome {
	api, err := c.api(baseURL)
	if err != nil {
		return outcome{kind: KindUnknown, detail: err.Error()}
	}
	res, err := api.Call(ctx, tool, args, client.RequestID(requestID), client.Session(session))
	return classify(res, err)
}

// classify turns what api/client made of a call's answer into an outcome:
// a Result, a refusal (*client.APIError), an answer outside docs/api.md
// (*client.ProtocolError: an anomaly), or no answer at all (a transport
// error or a timeout: the call may or may not have happened).
func classify(res *client.Result, err error) outcome {
	var (
		ae *client.APIError
		pe *client.ProtocolError
	)
	switch {
	case err == nil:
		return classifyResult(res)
	case errors.As(err, &ae):
		return classifyRefusal(ae)
	case errors.As(err, &pe) && pe.Status == http.StatusOK:
		return outcome{kind: KindUnknown, httpStatus: pe.Status, detail: fmt.Sprintf("malformed 200 answer: %s", pe.Body)}
	case errors.As(err, &pe):
		return outcome{kind: KindUnknown, httpStatus: pe.Status, detail: fmt.Sprintf("HTTP %d without the error envelope: %q", pe.Status, pe.Body)}
	case errors.Is(err, client.ErrInvalid):
		return outcome{kind: KindUnknown, detail: err.Error()} // refused before sending
	}
	return outcome{kind: KindUnknown} // no answer: it may or may not have happened
}

// classifyResult classifies a 200 answer: a finished record whose body's
// "replayed" the Idempotent-Replayed header repeats (denied and expired
// too, which only a gated call may be answered: workload.record checks
// that); or a 202 awaiting_approval, KindAwaiting.
func classifyResult(res *client.Result) outcome {
	o := outcome{kind: KindUnknown, httpStatus: http.StatusOK}
	if res.Status == statusAwaiting {
		// 202: a gated call reserved (or still) awaiting a decision.
		o.kind, o.executionID, o.status, o.httpStatus = KindAwaiting, res.ExecutionID, statusAwaiting, http.StatusAccepted
		return o
	}
	var body struct {
		Replayed bool `json:"replayed"`
	}
	if json.Unmarshal(res.Raw, &body) != nil || !answerStatus(string(res.Status)) {
		o.detail = fmt.Sprintf("malformed 200 answer: %s", res.Raw)
		return o
	}
	if (res.Header.Get("Idempotent-Replayed") == "true") != body.Replayed {
		o.detail = fmt.Sprintf("Idempotent-Replayed header %q disagrees with the body: %s", res.Header.Get("Idempotent-Replayed"), res.Raw)
		return o
	}
	var errObj json.RawMessage
	if res.Error != nil {
		errObj = res.Error.Details
	}
	o.kind, o.executionID, o.status, o.replayed = KindOK, res.ExecutionID, string(res.Status), body.Replayed
	o.result, o.stamps = canonicalResult(o.status, res.Data, errObj), stamp(res.StartedAt)+"|"+stamp(res.FinishedAt)
	if res.Status == client.StatusCompleted && json.Unmarshal(res.Data, &o.data) == nil {
		o.hasData = true
	}
	return o
}

// stamp writes a record's timestamp ("" when absent).
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// classifyRefusal classifies an error answer (the envelope of docs/errors.md).
func classifyRefusal(ae *client.APIError) outcome {
	o := outcome{kind: KindUnknown, httpStatus: ae.Status, code: ae.Code}
	switch {
	case ae.Status == http.StatusConflict && ae.Code == client.CodeConflict:
		o.kind, o.executionID = KindConflict, ae.ExecutionID
	case ae.Status == http.StatusConflict && ae.Code == client.CodeUncertain:
		o.kind, o.executionID, o.status = KindUncertain, ae.ExecutionID, string(ae.ExecStatus)
		if o.status != statusRunning && o.status != statusInterrupted {
			o.kind, o.detail = KindUnknown, fmt.Sprintf("EXECUTION_UNCERTAIN with status %q", o.status)
		}
	case ae.Status == http.StatusServiceUnavailable && ae.Code == client.CodeUnavailable:
		o.kind = KindUnavailable
	default:
		o.detail = fmt.Sprintf("unexpected answer HTTP %d %s: %s", ae.Status, ae.Code, ae.Message)
	}
	return o
}

// canonicalResult encodes what every answer of an identity must repeat,
// over either transport: the status and the data or error (as JSON with
// sorted keys). The timestamps, which only HTTP answers carry, are
// compared apart (checkReplays).
func canonicalResult(status string, data, errObj json.RawMessage) string {
	var b strings.Builder
	b.WriteString(status)
	for _, part := range []json.RawMessage{data, errObj} {
		b.WriteByte('|')
		var v any
		if len(part) == 0 || json.Unmarshal(part, &v) != nil {
			continue
		}
		if out, err := json.Marshal(v); err == nil {
			b.Write(out)
		}
	}
	return b.String()
}

// mcpAnswer is what classifyMCP reads of an answer of /mcp.
type mcpAnswer struct {
	Result *struct {
		Meta struct {
			ExecutionID string `json:"carmy/execution_id"`
			Status      string `json:"carmy/status"`
			Replayed    *bool  `json:"carmy/replayed"`
			RequestID   string `json:"carmy/request_id"`
			ErrorCode   string `json:"carmy/error_code"`
		} `json:"_meta"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// callMCP sends one tool call to baseURL's /mcp as a stateless MCP client
// of version does (no initialize: docs/mcp.md), with the identity in _meta,
// and classifies the answer as call does.
func (c *nodeClient) callMCP(ctx context.Context, baseURL, version, tool, requestID string, args ledgerapi.Args) outcome {
	mc := &mcpclient.Client{HTTP: c.hc, URL: baseURL + "/mcp", Version: version, Name: "carmy-robustness", Token: c.tokens.Agent}
	a, err := mc.CallTool(ctx, tool, args, map[string]any{"carmy/request_id": requestID, "carmy/session_id": session})
	if err != nil {
		// No answer, or not all of it: the call may or may not have
		// happened.
		return outcome{kind: KindUnknown, httpStatus: a.Status}
	}
	return classifyMCP(a.Status, requestID, a.Body)
}

// classifyMCP turns an answer of /mcp into an outcome, as classify does
// an HTTP answer: a result with Carmy's record is KindOK (its data is the
// text item, the JSON text of the recorded data; its error the
// structuredContent's); a refusal (isError with carmy/error_code) is
// classified by its code and the envelope of docs/errors.md; anything else (a
// JSON-RPC error, an HTTP error) fits no kind of the contract. A gated
// call awaiting a decision (status awaiting_approval, APPROVAL_PENDING)
// is KindAwaiting.
func classifyMCP(status int, requestID string, raw []byte) outcome {
	o := outcome{kind: KindUnknown, httpStatus: status}
	var a mcpAnswer
	if status != http.StatusOK || json.Unmarshal(raw, &a) != nil || (a.Result == nil && a.Error == nil) {
		o.detail = fmt.Sprintf("MCP: HTTP %d without a JSON-RPC answer: %q", status, raw)
		return o
	}
	if a.Error != nil {
		o.detail = fmt.Sprintf("MCP: JSON-RPC error %d: %s", a.Error.Code, a.Error.Message)
		return o
	}
	r := a.Result
	if code := r.Meta.ErrorCode; code != "" {
		var e errorBody
		if err := json.Unmarshal(r.Structured, &e); err != nil || e.Error.Code != code || !r.IsError {
			o.detail = fmt.Sprintf("MCP: refusal %s without its envelope in structuredContent (isError %v): %s", code, r.IsError, raw)
			return o
		}
		o.code = code
		switch code {
		case "IDEMPOTENCY_CONFLICT":
			o.kind, o.executionID = KindConflict, e.Error.ExecutionID
		case "EXECUTION_UNCERTAIN":
			o.kind, o.executionID, o.status = KindUncertain, e.Error.ExecutionID, e.Error.Status
			if o.status != statusRunning && o.status != statusInterrupted {
				o.kind, o.detail = KindUnknown, fmt.Sprintf("MCP: EXECUTION_UNCERTAIN with status %q", o.status)
			}
		case "UNAVAILABLE":
			o.kind = KindUnavailable
		default:
			o.detail = fmt.Sprintf("MCP: unexpected refusal %s: %s", code, e.Error.Message)
		}
		return o
	}
	m := r.Meta
	if m.Status == statusAwaiting {
		// A gated call awaiting a decision, answered to a client
		// without tasks: an isError result with APPROVAL_PENDING.
		var e errorBody
		if m.ExecutionID == "" || m.RequestID != requestID || !r.IsError || json.Unmarshal(r.Structured, &e) != nil ||
			e.Error.Code != "APPROVAL_PENDING" || e.Error.ExecutionID != m.ExecutionID {
			o.detail = fmt.Sprintf("MCP: an awaiting_approval result without APPROVAL_PENDING naming its execution: %s", raw)
			return o
		}
		o.kind, o.executionID, o.status = KindAwaiting, m.ExecutionID, statusAwaiting
		return o
	}
	switch {
	case m.ExecutionID == "" || !answerStatus(m.Status) || m.Replayed == nil || m.RequestID != requestID:
		o.detail = fmt.Sprintf("MCP: a result without Carmy's record in _meta: %s", raw)
		return o
	case r.IsError != (m.Status != "completed"):
		o.detail = fmt.Sprintf("MCP: isError %v for status %s: %s", r.IsError, m.Status, raw)
		return o
	case len(r.Content) != 1 || r.Content[0].Type != "text":
		o.detail = fmt.Sprintf("MCP: content is not one text item: %s", raw)
		return o
	}
	var data, errObj json.RawMessage
	if m.Status == "completed" {
		data = json.RawMessage(r.Content[0].Text)
	} else {
		var wrapped struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(r.Structured, &wrapped) != nil || len(wrapped.Error) == 0 {
			o.detail = fmt.Sprintf("MCP: a %s result without its error in structuredContent: %s", m.Status, raw)
			return o
		}
		errObj = wrapped.Error
	}
	o.kind, o.executionID, o.status, o.replayed = KindOK, m.ExecutionID, m.Status, *m.Replayed
	o.result = canonicalResult(m.Status, data, errObj)
	if m.Status == "completed" && json.Unmarshal(data, &o.data) == nil {
		o.hasData = true
	}
	return o
}

// lookup reads the identity's record (once, from that node); found is
// false on NOT_FOUND.
func (c *nodeClient) lookup(ctx context.Context, baseURL, requestID string) (r client.Execution, found bool, err error) {
	api, err := c.api(baseURL)
	if err != nil {
		return r, false, err
	}
	exec, err := api.Lookup(ctx, requestID, session)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return r, false, nil
	case err != nil:
		return r, false, err
	}
	return *exec, true, nil
}

// faultRules is the body of PUT /internal/v1/faults.
type faultRules struct {
	DropIn  []string `json:"drop_in"`
	DropOut []string `json:"drop_out"`
}

// setFaults replaces the node's fault-layer rules.
func (c *nodeClient) setFaults(ctx context.Context, baseURL string, rules faultRules) error {
	if rules.DropIn == nil {
		rules.DropIn = []string{}
	}
	if rules.DropOut == nil {
		rules.DropOut = []string{}
	}
	body, _ := json.Marshal(rules)
	return c.asPeer(ctx, http.MethodPut, baseURL+"/internal/v1/faults", body, nil)
}

// digest is GET /internal/v1/state.
type digest struct {
	AppliedIndex uint64 `json:"applied_index"`
	FSMIndex     uint64 `json:"fsm_index"`
	Hash         string `json:"hash"`
	Records      int    `json:"records"`
}

func (c *nodeClient) digest(ctx context.Context, baseURL string) (d digest, err error) {
	err = c.asPeer(ctx, http.MethodGet, baseURL+"/internal/v1/state", nil, &d)
	return d, err
}

// asPeer calls a peer (node-to-node) endpoint over mutual TLS, with the
// cluster key.
func (c *nodeClient) asPeer(ctx context.Context, method, url string, body []byte, out any) error {
	return c.send(ctx, method, strings.Replace(url, "http://", "https://", 1), body, true, out)
}

// addNode adds n as a voter through the node at baseURL (once, as the
// admin).
func (c *nodeClient) addNode(ctx context.Context, baseURL string, n wire.NodeSpec) error {
	api, err := c.adminAPI(baseURL)
	if err == nil {
		_, err = api.AddNode(ctx, n)
	}
	return err
}

// removeNode removes the member id through the node at baseURL (once, as
// the admin).
func (c *nodeClient) removeNode(ctx context.Context, baseURL, id string) error {
	api, err := c.adminAPI(baseURL)
	if err == nil {
		_, err = api.RemoveNode(ctx, id)
	}
	return err
}

// send makes one request, with the cluster key when withKey, and decodes a
// 200 answer into out (when not nil); any other status is an error.
func (c *nodeClient) send(ctx context.Context, method, url string, body []byte, withKey bool, out any) error {
	if strings.HasPrefix(url, "/") {
		return errors.New("robustness: the node has no published port (down or cut off)")
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if withKey {
		req.Header.Set("Carmy-Cluster-Key", c.key)
	}
	req.Header.Set("Content-Type", "application/json")
	hc := c.hc
	if withKey {
		hc = c.peerHC
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}
