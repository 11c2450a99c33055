package api

import (
	"encoding/json"
	"net/http"

	"github.com/carmyhq/carmy/internal/authfail"
	"github.com/carmyhq/carmy/store"
)

// guardPeer puts the cluster-key guard in front of the node-to-node
// (peer) endpoints: a wrong cluster key from a client address over its
// failures (wrong keys, which the peer handler reports through authfail)
// is answered 429 RATE_LIMITED with Retry-After, in the peer endpoints'
// error form, instead of 403, until its bucket refills (one attempt per
// 60/PerMinute seconds). A right key is never refused: unlike a token's,
// a cluster key of 128 bits and more cannot be guessed at any rate, and
// the nodes of a cluster often share an address (loopback, a NAT) with
// whatever sends a wrong one — a misconfigured node must not lock the
// others out.
// Wrong keys are counted apart from wrong tokens (carmy_cluster_key_
// failures_total): an agent with a stale token never locks out a node
// that shares its address. Node-to-node calls come straight from the
// nodes, so X-Forwarded-For is believed only from Config.TrustedProxies,
// as everywhere.
func (s *Server) guardPeer(next http.Handler) http.Handler {
	g := s.keyGuard
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		src := g.sourceOf(r)
		refuse := func(w http.ResponseWriter) bool {
			err := g.check(src, r.URL.Path, w.Header())
			if err == nil {
				return false
			}
			body, _ := json.Marshal(map[string]any{"code": store.CodeRateLimited, "message": err.Error(), "source": sourceName(src)})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write(body)
			return true
		}
		ctx := authfail.WithReporter(r.Context(), func(reason string) { g.fail(src, reason, r.URL.Path) }, refuse)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
