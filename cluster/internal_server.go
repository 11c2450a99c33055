package cluster

import (
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/cluster/wire"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/internal/authfail"
	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/internal/tlsmux"
	"github.com/carmyhq/carmy/store"
)

// InternalHandler serves the internal endpoints (mount it at
// InternalPrefix).
func (n *Node) InternalHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathStream, n.serveStream)
	mux.HandleFunc("POST "+pathSilence, n.serveSilence)
	mux.HandleFunc("POST "+pathReadIndex, n.serveReadIndex)
	mux.HandleFunc("POST "+pathJoin, n.serveJoin)
	mux.HandleFunc("POST "+pathRemove, n.serveRemove)
	mux.HandleFunc("GET "+pathState, n.serveState)
	return n.authenticate(mux)
}

// authenticate refuses callers that are not cluster members, whatever
// their address: with node TLS, a caller must have come over mutual TLS
// under tlsmux.NodeServerName with a certificate of the cluster CA that
// carries the node role (chain and role checked at the handshake, the role
// again here); with a cluster key, it must carry the key (compared in
// constant time). With both, both are checked. Validate makes sure a node
// has one of them. A wrong key (not a missing one) is reported to the
// request context's authfail reporter: the API server counts it against
// the caller's address, and answers 429 once it is over its failures.
//
// A member must then speak this node's protocol version (ProtocolHeader,
// ProtocolVersion): one that names another is refused, logged through the
// refusal log with both versions. Every call a node makes names it; only
// GET state may go without, since tools holding the cluster key read it
// too. Every answer names this node's version.
func (n *Node) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(ProtocolHeader, protocolString)
		if n.tls != nil && (r.TLS == nil || r.TLS.ServerName != tlsmux.NodeServerName || len(r.TLS.PeerCertificates) == 0 ||
			!certs.HasNodeRole(r.TLS.PeerCertificates[0])) {
			n.refusals.Refused("internal call without a node certificate", r.RemoteAddr, errors.New(r.Method+" "+r.URL.Path))
			writeInternalError(w, http.StatusForbidden, wire.Coded(store.CodeForbidden, "the internal API needs mutual TLS with a node certificate of this cluster"))
			return
		}
		if n.cfg.ClusterKey != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(keyHeader)), []byte(n.cfg.ClusterKey)) != 1 {
			n.refusals.Refused("internal call without the cluster key", r.RemoteAddr, errors.New(r.Method+" "+r.URL.Path))
			if len(r.Header.Values(keyHeader)) > 0 {
				// A key that is wrong is a guess (none at all is not):
				// the server in front counts it against the caller, and
				// answers 429 once the caller is over its failures.
				if authfail.Refuse(r.Context(), w) {
					return
				}
				authfail.Report(r.Context(), "wrong cluster key")
			}
			writeInternalError(w, http.StatusForbidden, wire.Coded(store.CodeForbidden, "missing or wrong cluster key"))
			return
		}
		if n.tls == nil && n.cfg.ClusterKey == "" {
			// Unreachable (Validate), and never open if it were.
			writeInternalError(w, http.StatusForbidden, wire.Coded(store.CodeForbidden, "this node has neither a cluster key nor node TLS"))
			return
		}
		if v := r.Header.Get(ProtocolHeader); v != protocolString && (v != "" || r.URL.Path != pathState) {
			err := nodeauth.ProtocolMismatch("the caller", v)
			n.refusals.Refused("internal call of another node protocol version", r.RemoteAddr, err)
			writeInternalError(w, http.StatusForbidden, wire.Coded(store.CodeForbidden, err.Error()))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxInternalReq)
		next.ServeHTTP(w, r)
	})
}

// outcomeOf is an audit line's outcome: "ok" or the error.
func outcomeOf(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeInternalError answers with status and what went wrong.
func writeInternalError(w http.ResponseWriter, status int, we wire.Error) {
	writeJSON(w, status, we)
}

// forwardedBatch is a batch of forwarded commands on its way through the
// leader: startForwarded hands its commands to the proposer, and
// finishForwarded waits for their outcomes.
type forwardedBatch struct {
	cmds    [][]byte
	omit    []bool // omit[i]: command i's sender asked for its success without the record's data (forward.AppendBatch)
	results []wire.Result
	// items are the proposals, nil for a command refused at the door;
	// items itself is nil on a node that did not lead.
	items []*proposal
	start time.Time
}

// startForwarded hands cmds to the proposer, all at once, so they share
// rounds with each other and with local writes. On a node that does not
// lead, nothing is proposed: every command's answer is "not the leader".
func (n *Node) startForwarded(cmds [][]byte, omit []bool) *forwardedBatch {
	b := &forwardedBatch{cmds: cmds, omit: omit, results: make([]wire.Result, len(cmds)), start: time.Now()}
	if !n.IsLeader() {
		for i := range b.results {
			b.results[i] = wire.Result{Error: wire.ErrorOf(wire.ErrNotLeader)}
		}
		return b
	}
	b.items = make([]*proposal, len(cmds))
	queue := make([]*proposal, 0, len(cmds))
	// The commands are not decoded here: the FSM decodes each once, and
	// answers one it cannot read with INVALID_REQUEST on every replica
	// alike. Only an empty command, one over the size every node refuses
	// (checkSize), or a reservation while this node's log waits for disk
	// space (refuseForwardedOnFullDisk) is refused at the door.
	for i, raw := range cmds {
		if len(raw) == 0 {
			b.results[i] = wire.Result{Error: wire.Coded(store.CodeInvalidRequest, "empty command")}
			continue
		}
		if err := checkSize("forwarded", raw); err != nil {
			b.results[i] = wire.Result{Error: wire.ErrorOf(err)}
			continue
		}
		if err := n.refuseForwardedOnFullDisk(raw); err != nil {
			b.results[i] = wire.Result{Error: wire.ErrorOf(err)}
			continue
		}
		b.items[i] = newProposal(raw, n.cfg.LeaderWait)
		queue = append(queue, b.items[i])
	}
	n.proposer.propose(queue...)
	return b
}

// finishForwarded waits for the outcome of every command of b, as a local
// command's is waited for (awaitProposal, bounded by LeaderWait only while
// the log waits for disk space), logs the batch (audit, with r's caller)
// and returns its results.
func (n *Node) finishForwarded(r *http.Request, b *forwardedBatch) []wire.Result {
	kinds := commandKinds(b.cmds)
	if b.items == nil {
		n.audit(r, "apply", slog.Int("commands", len(b.cmds)), slog.String("kinds", kinds), slog.String("outcome", "not the leader"))
		return b.results
	}
	for i, it := range b.items {
		if it == nil {
			continue
		}
		out := n.awaitProposal(it, b.start.Add(n.cfg.LeaderWait))
		resp, err := out.resp, out.err
		n.observeApply(originForwarded, b.start, err)
		if err != nil {
			b.results[i] = wire.Result{Error: wire.ErrorOf(err)}
			continue
		}
		if b.omit[i] && resp.Code == "" {
			resp.Record.Data, resp.Record.Error = nil, nil
		}
		b.results[i] = wire.Result{Response: &resp}
	}
	applied, refused, failed := 0, 0, 0
	for _, res := range b.results {
		switch {
		case res.Response != nil && res.Response.Code == "":
			applied++
		case res.Response != nil:
			refused++ // applied, with an outcome such as a conflict
		default:
			failed++
		}
	}
	n.audit(r, "apply", slog.Int("commands", len(b.cmds)), slog.String("kinds", kinds),
		slog.String("outcome", "done"), slog.Int("ok", applied), slog.Int("refused", refused), slog.Int("failed", failed))
	return b.results
}

func (n *Node) serveReadIndex(w http.ResponseWriter, r *http.Request) {
	idx, err := n.leaderReadIndex(r.Context())
	if err != nil {
		writeInternalError(w, http.StatusServiceUnavailable, wire.ErrorOf(err))
		return
	}
	writeJSON(w, http.StatusOK, indexAnswer{Index: idx})
}

func (n *Node) serveJoin(w http.ResponseWriter, r *http.Request) {
	var info fsm.NodeInfo
	if err := json.NewDecoder(r.Body).Decode(&info); err != nil {
		writeInternalError(w, http.StatusBadRequest, wire.Coded(store.CodeInvalidRequest, err.Error()))
		return
	}
	nodes, err := n.addNode(withActor(r), info)
	n.audit(r, "join", slog.String("target", info.ID), slog.String("target_raft_addr", info.RaftAddr),
		slog.String("target_http_addr", info.HTTPAddr), slog.String("outcome", outcomeOf(err)))
	if err != nil {
		writeInternalError(w, statusOf(err), wire.ErrorOf(err))
		return
	}
	// The table may not list this node's gossip address yet (it registers
	// itself in the background); the joiner needs one to enter the pool.
	if !slices.ContainsFunc(nodes, func(m fsm.NodeInfo) bool { return m.ID == n.cfg.NodeID && m.GossipAddr != "" }) {
		nodes = append(nodes, n.info())
	}
	writeJSON(w, http.StatusOK, joinAnswer{Nodes: nodes})
}

func (n *Node) serveRemove(w http.ResponseWriter, r *http.Request) {
	var req removeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeInternalError(w, http.StatusBadRequest, wire.Coded(store.CodeInvalidRequest, err.Error()))
		return
	}
	err := n.RemoveNode(withActor(r), req.ID)
	n.audit(r, "remove", slog.String("target", req.ID), slog.String("outcome", outcomeOf(err)))
	if err != nil {
		writeInternalError(w, statusOf(err), wire.ErrorOf(err))
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// ServerTLSConfig is the TLS configuration the node's HTTP listener serves
// to other nodes (those naming tlsmux.NodeServerName): the node's
// certificate, TLS 1.3, and a client certificate required and checked
// against the cluster CA. It is nil without node TLS.
func (n *Node) ServerTLSConfig() *tls.Config {
	if n.tls == nil {
		return nil
	}
	c := n.tls.ServerConfig()
	c.NextProtos = []string{"http/1.1"}
	return c
}
