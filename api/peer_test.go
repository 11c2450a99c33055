package api_test

import (
	"net/http"
	"testing"

	"github.com/carmyhq/carmy/api"
)

// The node-to-node endpoints are served from Config.Peer, and from the
// deprecated Config.Internal while Peer is nil; Peer wins when both are
// set.
func TestPeerHandlerIsServed(t *testing.T) {
	answer := func(status int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) })
	}
	for name, tc := range map[string]struct {
		cfg  api.Config
		want int
	}{
		"peer":     {api.Config{Peer: answer(http.StatusNoContent)}, http.StatusNoContent},
		"internal": {api.Config{Internal: answer(http.StatusAccepted)}, http.StatusAccepted},
		"both":     {api.Config{Peer: answer(http.StatusNoContent), Internal: answer(http.StatusAccepted)}, http.StatusNoContent},
	} {
		srv := newTestServer(t, &fakeRuntime{tb: t}, tc.cfg)
		if a := send(t, srv, request{method: http.MethodPost, path: "/internal/v1/state"}); a.status != tc.want {
			t.Errorf("%s: POST /internal/v1/state = %d, want %d", name, a.status, tc.want)
		}
	}
}
