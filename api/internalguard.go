package api

import (
	"encoding/json"
	"net/http"

	"github.com/carmyhq/carmy/internal/authfail"
	"github.com/carmyhq/carmy/store"
)

// guardInternal puts the cluster-key guard in front of the node-to-node
// endpoints: a client address over its failures (wrong cluster keys,
// which the internal handler reports through authfail) is answered 429
// RATE_LIMITED with Retry-After, in the internal API's error form, before
// its key is looked at; a right key from it is refused too, until its
// bucket refills (one attempt per 60/PerMinute seconds), as for tokens.
// Wrong keys are counted apart from wrong tokens (carmy_cluster_key_
// failures_total): an agent with a stale token never locks out a node
// that shares its address. Node-to-node calls come straight from the
// nodes, so X-Forwarded-For is believed only from Config.TrustedProxies,
// as everywhere.
func (s *Server) guardInternal(next http.Handler) http.Handler {
	g := s.keyGuard
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		src := g.sourceOf(r)
		if err := g.check(src, r.URL.Path, w.Header()); err != nil {
			body, _ := json.Marshal(map[string]any{"code": store.CodeRateLimited, "message": err.Error(), "source": sourceName(src)})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write(body)
			return
		}
		ctx := authfail.WithReporter(r.Context(), func(reason string) { g.fail(src, reason, r.URL.Path) })
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
