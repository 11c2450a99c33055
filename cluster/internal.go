package cluster

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync/atomic"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/internal/tlsmux"
	"github.com/carmyhq/carmy/store"
)

// The internal endpoints, served under the node's HTTP address. Only
// cluster members may call them: over mutual TLS with node TLS, with the
// cluster key when one is set, and from loopback when neither is.
const (
	pathApply     = "/internal/v1/apply"
	pathReadIndex = "/internal/v1/readindex"
	pathJoin      = "/internal/v1/join"
	pathRemove    = "/internal/v1/remove"
	pathState     = "/internal/v1/state"
	// InternalPrefix is the path prefix the internal handler serves.
	InternalPrefix = "/internal/"
	keyHeader      = "Carmy-Cluster-Key"
	maxInternalReq = 64 << 20
)

// Internal error codes, carried in answers.
const (
	codeNotLeader     = "not_leader"
	codeCommitUnknown = "commit_unknown"
	codeUnavailable   = "unavailable"
	codeInvalid       = "invalid"
	codeConflict      = "conflict"
	codeNotFound      = "not_found"
)

type applyRequest struct {
	Commands []json.RawMessage `json:"commands"`
}

type applyResult struct {
	Response *fsm.Response `json:"response,omitempty"`
	Error    string        `json:"error,omitempty"`
	Message  string        `json:"message,omitempty"`
}

type applyAnswer struct {
	Results []applyResult `json:"results"`
}

type indexAnswer struct {
	Index uint64 `json:"index"`
}

type joinAnswer struct {
	Nodes []fsm.NodeInfo `json:"nodes"`
}

type removeRequest struct {
	ID string `json:"id"`
}

type errorAnswer struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// InternalHandler serves the internal endpoints (mount it at
// InternalPrefix).
func (n *Node) InternalHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathApply, n.serveApply)
	mux.HandleFunc("POST "+pathReadIndex, n.serveReadIndex)
	mux.HandleFunc("POST "+pathJoin, n.serveJoin)
	mux.HandleFunc("POST "+pathRemove, n.serveRemove)
	mux.HandleFunc("GET "+pathState, n.serveState)
	return n.authenticate(mux)
}

// authenticate refuses callers that are not cluster members. With node
// TLS, a caller must have come over mutual TLS under
// tlsmux.NodeServerName (its certificate chained to the cluster CA at the
// handshake); with a cluster key, it must carry the key; with neither, it
// must be on loopback.
func (n *Node) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.tls != nil && (r.TLS == nil || r.TLS.ServerName != tlsmux.NodeServerName || len(r.TLS.PeerCertificates) == 0) {
			writeInternalError(w, http.StatusForbidden, "forbidden", "the internal API needs mutual TLS with a node certificate of this cluster")
			return
		}
		switch {
		case n.cfg.ClusterKey != "":
			if subtle.ConstantTimeCompare([]byte(r.Header.Get(keyHeader)), []byte(n.cfg.ClusterKey)) != 1 {
				writeInternalError(w, http.StatusForbidden, "forbidden", "missing or wrong cluster key")
				return
			}
		case n.tls == nil:
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				writeInternalError(w, http.StatusForbidden, "forbidden", "the internal API is loopback-only without a cluster key or node TLS")
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxInternalReq)
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeInternalError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorAnswer{Error: code, Message: msg})
}

// codeOf names an error for the wire.
func codeOf(err error) string {
	switch {
	case errors.Is(err, errNotLeader):
		return codeNotLeader
	case errors.Is(err, store.ErrCommitUnknown):
		return codeCommitUnknown
	case errors.Is(err, store.ErrInvalid):
		return codeInvalid
	case errors.Is(err, store.ErrConflict):
		return codeConflict
	case errors.Is(err, store.ErrNotFound):
		return codeNotFound
	}
	return codeUnavailable
}

// errorOf rebuilds an error from its wire code.
func errorOf(code, msg string) error {
	switch code {
	case codeNotLeader:
		return errNotLeader
	case codeCommitUnknown:
		return fmt.Errorf("%w: %s", store.ErrCommitUnknown, msg)
	case codeInvalid:
		return fmt.Errorf("%w: %s", store.ErrInvalid, msg)
	case codeConflict:
		return fmt.Errorf("%w: %s", store.ErrConflict, msg)
	case codeNotFound:
		return &notFoundError{msg: msg}
	}
	return fmt.Errorf("%w: %s", store.ErrUnavailable, msg)
}

// serveApply applies a batch of forwarded commands. All are handed to Raft
// at once, so they share rounds with each other and with local writes.
func (n *Node) serveApply(w http.ResponseWriter, r *http.Request) {
	var req applyRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeInternalError(w, http.StatusBadRequest, codeInvalid, err.Error())
		return
	}
	ans := applyAnswer{Results: make([]applyResult, len(req.Commands))}
	if !n.IsLeader() {
		for i := range ans.Results {
			ans.Results[i] = applyResult{Error: codeNotLeader}
		}
		writeJSON(w, http.StatusOK, ans)
		return
	}
	items := make([]*proposal, len(req.Commands)) // nil for a refused command
	queue := make([]*proposal, 0, len(req.Commands))
	start := time.Now()
	// The commands are not decoded here: the FSM decodes each once, and
	// answers one it cannot read with INVALID_REQUEST on every replica
	// alike. Only an empty command is refused at the door.
	for i, raw := range req.Commands {
		if len(raw) == 0 {
			ans.Results[i] = applyResult{Error: codeInvalid, Message: "empty command"}
			continue
		}
		items[i] = newProposal(raw, n.cfg.LeaderWait)
		queue = append(queue, items[i])
	}
	n.proposer.propose(queue...)
	for i, it := range items {
		if it == nil {
			continue
		}
		resp, err := n.waitApply(<-it.done)
		n.observeApply(originForwarded, start, err)
		if err != nil {
			ans.Results[i] = applyResult{Error: codeOf(err), Message: err.Error()}
			continue
		}
		ans.Results[i] = applyResult{Response: &resp}
	}
	writeJSON(w, http.StatusOK, ans)
}

func (n *Node) serveReadIndex(w http.ResponseWriter, r *http.Request) {
	idx, err := n.leaderReadIndex(r.Context())
	if err != nil {
		writeInternalError(w, http.StatusServiceUnavailable, codeOf(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, indexAnswer{Index: idx})
}

func (n *Node) serveJoin(w http.ResponseWriter, r *http.Request) {
	var info fsm.NodeInfo
	if err := json.NewDecoder(r.Body).Decode(&info); err != nil {
		writeInternalError(w, http.StatusBadRequest, codeInvalid, err.Error())
		return
	}
	nodes, err := n.AddNode(r.Context(), info)
	if err != nil {
		writeInternalError(w, statusOfInternal(err), codeOf(err), err.Error())
		return
	}
	// The table may not list this node's gossip address yet (it registers
	// itself in the background); the joiner needs one to enter the pool.
	if !slices.ContainsFunc(nodes, func(m fsm.NodeInfo) bool { return m.ID == n.cfg.NodeID && m.GossipAddr != "" }) {
		nodes = append(nodes, n.Info())
	}
	writeJSON(w, http.StatusOK, joinAnswer{Nodes: nodes})
}

func (n *Node) serveRemove(w http.ResponseWriter, r *http.Request) {
	var req removeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeInternalError(w, http.StatusBadRequest, codeInvalid, err.Error())
		return
	}
	if err := n.RemoveNode(r.Context(), req.ID); err != nil {
		writeInternalError(w, statusOfInternal(err), codeOf(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func statusOfInternal(err error) int {
	switch {
	case errors.Is(err, store.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	}
	return http.StatusServiceUnavailable
}

// internalClient calls other nodes' internal endpoints over kept-alive
// connections.
type internalClient struct {
	key    string
	scheme string // "https" with node TLS
	hc     *http.Client
}

// newInternalClient returns the client of a node with cfg: it sends
// cfg.ClusterKey, dials through cfg.Faults when that is set, and with t
// speaks mutual TLS under tlsmux.NodeServerName, accepting only a server
// whose certificate chains to the cluster CA.
func newInternalClient(cfg Config, t *nodeTLS) *internalClient {
	dial := (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if cfg.Faults != nil {
		dial = cfg.Faults.DialContext(dial)
	}
	tr := &http.Transport{
		DialContext:         dial,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second,
	}
	c := &internalClient{key: cfg.ClusterKey, scheme: "http", hc: &http.Client{Transport: tr}}
	if t != nil {
		tc := t.clientConfig()
		tc.ServerName = tlsmux.NodeServerName
		tc.NextProtos = []string{"http/1.1"}
		tr.TLSClientConfig = tc
		c.scheme = "https"
	}
	return c
}

func (c *internalClient) close() { c.hc.CloseIdleConnections() }

// post sends body to addr's path and decodes a 200 answer into out. An
// error answer becomes the error it names. sent reports whether the
// request may have reached the other node.
func (c *internalClient) post(ctx context.Context, addr, path string, body, out any) (sent bool, err error) {
	b, err := json.Marshal(body)
	if err != nil {
		return false, err
	}
	return c.do(ctx, http.MethodPost, addr, path, b, out)
}

// get fetches addr's path and decodes a 200 answer into out, as post does.
func (c *internalClient) get(ctx context.Context, addr, path string, out any) error {
	_, err := c.do(ctx, http.MethodGet, addr, path, nil, out)
	return err
}

// do makes one request with the cluster key (and body, when not nil).
func (c *internalClient) do(ctx context.Context, method, addr, path string, body []byte, out any) (sent bool, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	// Until the client has a connection (dialled, and past its TLS
	// handshake), nothing of the request can have reached the other node.
	var gotConn atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
	})
	req, err := http.NewRequestWithContext(ctx, method, c.scheme+"://"+addr+path, rd)
	if err != nil {
		return false, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set(keyHeader, c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if !gotConn.Load() {
			return false, fmt.Errorf("%w: %w", errNotSent, err)
		}
		return true, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxInternalReq))
	if err != nil {
		return true, err
	}
	if resp.StatusCode != http.StatusOK {
		var ea errorAnswer
		if json.Unmarshal(raw, &ea) != nil || ea.Error == "" {
			return true, fmt.Errorf("%w: %s answered %s", store.ErrUnavailable, addr, resp.Status)
		}
		if ea.Error == "forbidden" {
			return true, fmt.Errorf("%w: %s refused this node: %s", store.ErrUnavailable, addr, ea.Message)
		}
		return true, errorOf(ea.Error, ea.Message)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return true, fmt.Errorf("cluster: answer of %s%s: %w", addr, path, err)
	}
	return true, nil
}

// notFoundError says that a member does not exist. It matches
// store.ErrNotFound and carries the NOT_FOUND code with its own message.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) ErrorCode() string    { return store.ErrNotFound.ErrorCode() }
func (e *notFoundError) Is(target error) bool { return target == store.ErrNotFound }
