package api_test

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/api"
)

// TestHTTPSOnlyAPI checks the API of a node with a certificate: a request
// over plain HTTP is 400 INVALID_REQUEST in the envelope and reaches no
// handler, while /internal/ is left to the peer handler (node TLS
// decides there), and a request that came over TLS is served.
func TestHTTPSOnlyAPI(t *testing.T) {
	reached := 0
	peer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		w.WriteHeader(http.StatusNoContent)
	})
	cfg := api.Config{TLS: &tls.Config{MinVersion: tls.VersionTLS12}, Peer: peer}
	rt := &fakeRuntime{tb: t}
	srv := newTestServer(t, rt, cfg) // plain HTTP: r.TLS is nil

	for _, path := range []string{"/v1/tools", "/healthz", "/openapi.json"} {
		a := send(t, srv, request{method: http.MethodGet, path: path})
		if a.status != http.StatusBadRequest || !strings.Contains(string(a.body), `"code":"INVALID_REQUEST"`) || !strings.Contains(string(a.body), "https://") {
			t.Errorf("plain GET %s: %d %s, want 400 INVALID_REQUEST naming https://", path, a.status, a.body)
		}
	}
	if a := send(t, srv, request{method: http.MethodPost, path: "/internal/v1/apply"}); a.status != http.StatusNoContent || reached != 1 {
		t.Errorf("plain POST /internal/v1/apply: %d (peer handler reached %d times), want it handed to the peer handler", a.status, reached)
	}

	tlsSrv := newTLSTestServer(t, rt, cfg)
	resp, err := tlsSrv.Client().Get(tlsSrv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz over TLS: %d, want 200", resp.StatusCode)
	}
}
