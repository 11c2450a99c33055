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

	"github.com/carmyhq/carmy/internal/robustness/ledgerapi"
	"github.com/carmyhq/carmy/internal/tlsmux"
)

// Workload constants shared by the clients and the checks.
const (
	// toolName is the ledger tool of the test image's config.
	toolName = "ledger_write"
	// session is the session every call uses (one principal: anonymous).
	session = "robustness"
	// callTimeout is how long a client waits for one answer: the leader
	// wait (5 s) plus the tool's timeout (2 s) plus slack. No answer by
	// then is an unknown outcome.
	callTimeout = 10 * time.Second
)

// answer is a POST /v1/tools/call answer, success or error.
type answer struct {
	ExecutionID string          `json:"execution_id"`
	Status      string          `json:"status"`
	Replayed    bool            `json:"replayed"`
	Data        json.RawMessage `json:"data"`
	Err         json.RawMessage `json:"error"`
	StartedAt   string          `json:"started_at"`
	FinishedAt  string          `json:"finished_at"`
}

// errorBody is the error envelope of SPEC §2.2.
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
	result      string // KindOK: canonical encoding of the recorded outcome
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
	// ihc calls the internal endpoints as a node would: mutual TLS under
	// tlsmux.NodeServerName with the harness's certificate.
	ihc *http.Client
}

// newNodeClient returns the harness's client; tlsDir holds the cluster CA
// (carmy-ca.pem) and the harness's certificate (harness.pem and its key).
func newNodeClient(t testing.TB, key, tlsDir string) *nodeClient {
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
		hc: &http.Client{Timeout: callTimeout}, key: key,
		ihc: &http.Client{Timeout: callTimeout, Transport: &http.Transport{TLSClientConfig: tc}},
	}
}

// call sends one tool call to baseURL and classifies the answer. An answer
// that fits no kind of the contract is KindUnknown with detail set.
func (c *nodeClient) call(ctx context.Context, baseURL, requestID string, args ledgerapi.Args) outcome {
	body, _ := json.Marshal(map[string]any{
		"tool": toolName, "arguments": args, "request_id": requestID, "session_id": session,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/tools/call", bytes.NewReader(body))
	if err != nil {
		return outcome{kind: KindUnknown, detail: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return outcome{kind: KindUnknown} // no answer: it may or may not have happened
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return outcome{kind: KindUnknown, httpStatus: resp.StatusCode}
	}
	return classify(resp.StatusCode, resp.Header, raw)
}

// classify turns an HTTP answer into an outcome.
func classify(status int, h http.Header, raw []byte) outcome {
	o := outcome{kind: KindUnknown, httpStatus: status}
	if status == http.StatusOK {
		var a answer
		if err := json.Unmarshal(raw, &a); err != nil || a.ExecutionID == "" || !finalStatuses[a.Status] {
			o.detail = fmt.Sprintf("malformed 200 answer: %s", raw)
			return o
		}
		if (h.Get("Idempotent-Replayed") == "true") != a.Replayed {
			o.detail = fmt.Sprintf("Idempotent-Replayed header %q disagrees with the body: %s", h.Get("Idempotent-Replayed"), raw)
			return o
		}
		o.kind, o.executionID, o.status, o.replayed = KindOK, a.ExecutionID, a.Status, a.Replayed
		o.result = canonicalResult(a)
		if a.Status == "completed" && json.Unmarshal(a.Data, &o.data) == nil {
			o.hasData = true
		}
		return o
	}
	var e errorBody
	if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code == "" {
		o.detail = fmt.Sprintf("HTTP %d without the error envelope: %q", status, raw)
		return o
	}
	o.code = e.Error.Code
	switch {
	case status == http.StatusConflict && e.Error.Code == "IDEMPOTENCY_CONFLICT":
		o.kind, o.executionID = KindConflict, e.Error.ExecutionID
	case status == http.StatusConflict && e.Error.Code == "EXECUTION_UNCERTAIN":
		o.kind, o.executionID, o.status = KindUncertain, e.Error.ExecutionID, e.Error.Status
		if o.status != statusRunning && o.status != statusInterrupted {
			o.kind, o.detail = KindUnknown, fmt.Sprintf("EXECUTION_UNCERTAIN with status %q", o.status)
		}
	case status == http.StatusServiceUnavailable && e.Error.Code == "UNAVAILABLE":
		o.kind = KindUnavailable
	default:
		o.detail = fmt.Sprintf("unexpected answer HTTP %d %s: %s", status, e.Error.Code, e.Error.Message)
	}
	return o
}

// canonicalResult encodes everything a replay must repeat: status, data or
// error, and the timestamps.
func canonicalResult(a answer) string {
	var b strings.Builder
	b.WriteString(a.Status)
	for _, part := range []json.RawMessage{a.Data, a.Err} {
		b.WriteByte('|')
		var buf bytes.Buffer
		if len(part) > 0 && json.Compact(&buf, part) == nil {
			b.Write(buf.Bytes())
		}
	}
	b.WriteString("|" + a.StartedAt + "|" + a.FinishedAt)
	return b.String()
}

// record is the part of GET /v1/executions?request_id=… the checks read.
type record struct {
	ExecutionID string `json:"execution_id"`
	Status      string `json:"status"`
	NodeID      string `json:"node_id"`
}

// lookup reads the identity's record; found is false on 404.
func (c *nodeClient) lookup(ctx context.Context, baseURL, requestID string) (r record, found bool, err error) {
	u := baseURL + "/v1/executions?session_id=" + session + "&request_id=" + requestID
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return r, false, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return r, false, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return r, true, json.Unmarshal(raw, &r)
	case http.StatusNotFound:
		return r, false, nil
	}
	return r, false, fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, raw)
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
	return c.internal(ctx, http.MethodPut, baseURL+"/internal/v1/faults", body, nil)
}

// digest is GET /internal/v1/state.
type digest struct {
	AppliedIndex uint64 `json:"applied_index"`
	FSMIndex     uint64 `json:"fsm_index"`
	Hash         string `json:"hash"`
	Records      int    `json:"records"`
}

func (c *nodeClient) digest(ctx context.Context, baseURL string) (d digest, err error) {
	err = c.internal(ctx, http.MethodGet, baseURL+"/internal/v1/state", nil, &d)
	return d, err
}

// internal calls a node-to-node endpoint over mutual TLS, with the
// cluster key.
func (c *nodeClient) internal(ctx context.Context, method, url string, body []byte, out any) error {
	return c.send(ctx, method, strings.Replace(url, "http://", "https://", 1), body, true, out)
}

// admin sends a cluster-administration request (auth is off in --dev).
func (c *nodeClient) admin(ctx context.Context, method, url string, body any) error {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	return c.send(ctx, method, url, b, false, nil)
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
		hc = c.ihc
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
