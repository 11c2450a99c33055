package cluster

import (
	"log/slog"
	"net/http"
	"slices"
	"strconv"

	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/fsm"
)

// Every write through the peer endpoints (a forwarded batch, a join,
// a removal) is logged once at INFO: who called (its address, the node id
// it names and, with node TLS, its certificate's name), what (the batch's
// size and command kinds, or the join's or removal's target) and the
// outcome. One line per request, never one per command.

// appendCaller appends what names the caller of a peer request: its
// address, the node id it sends (peer.NodeIDHeader; a claim, made by a
// caller that peer.Handler let through), and with node TLS its
// certificate's common name.
func appendCaller(dst []slog.Attr, r *http.Request) []slog.Attr {
	dst = append(dst, slog.String("remote_addr", r.RemoteAddr), slog.String("caller", r.Header.Get(peer.NodeIDHeader)))
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		dst = append(dst, slog.String("caller_cert", r.TLS.PeerCertificates[0].Subject.CommonName))
	}
	return dst
}

// callerOf is appendCaller's attributes as a log call's arguments.
func callerOf(r *http.Request) []any {
	var buf [3]slog.Attr
	attrs := appendCaller(buf[:0], r)
	out := make([]any, len(attrs))
	for i, a := range attrs {
		out[i] = a
	}
	return out
}

// commandKinds summarises a batch's command types, "complete=2 reserve=3",
// read from each command's first bytes (fsm.PeekType) without decoding
// it; a command of another shape counts as "other". The FSM decodes each
// command and decides; this is only the log's summary.
func commandKinds(cmds [][]byte) string {
	// A handful of kinds at most: counted in a small slice kept in kind
	// order as it fills, no map.
	type count struct {
		kind string
		n    int
	}
	var buf [4]count
	counts := buf[:0]
	for _, raw := range cmds {
		kind := "other"
		if t, ok := fsm.PeekType(raw); ok {
			kind = string(t)
		}
		i := 0
		for i < len(counts) && counts[i].kind < kind {
			i++
		}
		if i == len(counts) || counts[i].kind != kind {
			counts = slices.Insert(counts, i, count{kind: kind})
		}
		counts[i].n++
	}
	var text [64]byte
	b := text[:0]
	for i, c := range counts {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(append(append(b, c.kind...), '='), int64(c.n), 10)
	}
	return string(b)
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
	all := appendCaller(append(make([]slog.Attr, 0, 4+len(attrs)), slog.String("op", op)), r)
	n.log.LogAttrs(ctx, slog.LevelInfo, "internal write", append(all, attrs...)...)
}

// outcomeOf is an audit line's outcome: "ok" or the error.
func outcomeOf(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}
