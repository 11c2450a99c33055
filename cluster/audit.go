package cluster

import (
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/fsm"
)

// Every write through the peer endpoints (a forwarded batch, a join,
// a removal) is logged once at INFO: who called (its address, the node id
// it names and, with node TLS, its certificate's name), what (the batch's
// size and command kinds, or the join's or removal's target) and the
// outcome. One line per request, never one per command.

// callerOf names the caller of a peer request: the node id it sends
// (peer.NodeIDHeader; a claim, made by a caller that peer.Handler let
// through), and
// with node TLS its certificate's common name.
func callerOf(r *http.Request) []any {
	attrs := []any{slog.String("remote_addr", r.RemoteAddr), slog.String("caller", r.Header.Get(peer.NodeIDHeader))}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		attrs = append(attrs, slog.String("caller_cert", r.TLS.PeerCertificates[0].Subject.CommonName))
	}
	return attrs
}

// commandKinds summarises a batch's command types, "complete=2 reserve=3",
// read from each command's first bytes (fsm.PeekType) without decoding
// it; a command of another shape counts as "other". The FSM decodes each
// command and decides; this is only the log's summary.
func commandKinds(cmds [][]byte) string {
	if len(cmds) == 1 {
		// Most forwarded batches under load: one command.
		if t, ok := fsm.PeekType(cmds[0]); ok {
			return string(t) + "=1"
		}
		return "other=1"
	}
	counts := map[string]int{}
	for _, raw := range cmds {
		kind := "other"
		if t, ok := fsm.PeekType(raw); ok {
			kind = string(t)
		}
		counts[kind]++
	}
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	for i, k := range kinds {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + strconv.Itoa(counts[k]))
	}
	return b.String()
}

// audit logs one write through the peer endpoints. The message stays
// "internal write", as the logs have always named it (docs/security.md;
// operators' alerts may match it).
//
// A loaded leader writes one for every forwarded batch, thousands a
// second: the attributes are typed (no boxing) and built only when INFO is
// logged.
func (n *Node) audit(r *http.Request, op string, attrs ...slog.Attr) {
	ctx := r.Context()
	if !n.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	all := make([]slog.Attr, 0, 4+len(attrs))
	all = append(all, slog.String("op", op), slog.String("remote_addr", r.RemoteAddr), slog.String("caller", r.Header.Get(peer.NodeIDHeader)))
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		all = append(all, slog.String("caller_cert", r.TLS.PeerCertificates[0].Subject.CommonName))
	}
	n.log.LogAttrs(ctx, slog.LevelInfo, "internal write", append(all, attrs...)...)
}

// outcomeOf is an audit line's outcome: "ok" or the error.
func outcomeOf(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}
