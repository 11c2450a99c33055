package cluster

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/cluster/wire"
	"github.com/carmyhq/carmy/store"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A member (it holds the key) that names another protocol version, or
// none, is refused with 403 and an error naming both versions, logged in
// the refusal log; GET state may go without one. Every answer names this
// node's version.
func TestInternalCallOfAnotherProtocolIsRefused(t *testing.T) {
	const key = "protocol-test-cluster-key"
	var logs syncBuffer
	n := &Node{cfg: Config{ClusterKey: key}, refusals: nodeauth.NewRefusals(slog.New(slog.NewTextHandler(&logs, nil)))}
	reached := 0
	h := n.authenticate(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached++
		w.WriteHeader(http.StatusOK)
	}))
	call := func(method, path, version string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(`{}`))
		req.Header.Set(keyHeader, key)
		if version != "" {
			req.Header.Set(ProtocolHeader, version)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get(ProtocolHeader); got != protocolString {
			t.Errorf("%s %s (version %q): answer names version %q, want %s", method, path, version, got, protocolString)
		}
		return rec
	}
	if rec := call(http.MethodPost, pathJoin, "3"); rec.Code != http.StatusForbidden ||
		!strings.Contains(rec.Body.String(), "speaks node protocol 3, this node 2") || !strings.Contains(rec.Body.String(), `"code":"FORBIDDEN"`) {
		t.Errorf("version 3: %d %s, want 403 naming both versions", rec.Code, rec.Body.String())
	}
	if !strings.Contains(logs.String(), "refused a peer: internal call of another node protocol version") ||
		!strings.Contains(logs.String(), "speaks node protocol 3, this node 2") {
		t.Errorf("the refusal is not logged with both versions:\n%s", logs.String())
	}
	if rec := call(http.MethodPost, pathStream, ""); rec.Code != http.StatusForbidden ||
		!strings.Contains(rec.Body.String(), "speaks node protocol none, this node 2") {
		t.Errorf("no version: %d %s, want 403", rec.Code, rec.Body.String())
	}
	if reached != 0 {
		t.Fatalf("the handler was reached %d times by refused calls", reached)
	}
	if rec := call(http.MethodGet, pathState, ""); rec.Code != http.StatusOK {
		t.Errorf("GET state without a version: %d, want 200", rec.Code)
	}
	if rec := call(http.MethodGet, pathState, "3"); rec.Code != http.StatusForbidden {
		t.Errorf("GET state of version 3: %d, want 403", rec.Code)
	}
	if rec := call(http.MethodPost, pathJoin, protocolString); rec.Code != http.StatusOK || reached != 2 {
		t.Errorf("this version: %d (handler reached %d times), want 200", rec.Code, reached)
	}
}

// A node whose call is answered by a node of another protocol version
// (an answer naming another, or a success naming none) gets an error that
// names both, matches nodeauth.ErrProtocol and wire.ErrRefused (nothing applied), and is
// no unknown outcome: on an ordinary call and on the stream's upgrade.
func TestAnswerOfAnotherProtocolIsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		version, want string
		status        int
	}{
		"another version":        {"3", "speaks node protocol 3, this node 2", http.StatusOK},
		"another version's 403":  {"3", "speaks node protocol 3, this node 2", http.StatusForbidden},
		"a success naming none":  {"", "speaks node protocol none, this node 2", http.StatusOK},
		"an upgrade naming none": {"", "speaks node protocol none, this node 2", http.StatusSwitchingProtocols},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if tc.version != "" {
				w.Header().Set(ProtocolHeader, tc.version)
			}
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(`{}`))
		}))
		addr := srv.Listener.Addr().String()
		c := newInternalClient(Config{NodeID: "n1"}, nil)
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, nodeauth.ErrProtocol) || !errors.Is(err, wire.ErrRefused) || !errors.Is(err, store.ErrUnavailable) ||
				errors.Is(err, store.ErrCommitUnknown) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s, %s: %v, want nodeauth.ErrProtocol saying %q", name, what, err, tc.want)
			}
		}
		if tc.status != http.StatusSwitchingProtocols {
			check("get", c.get(t.Context(), addr, pathState, &StateDigest{}))
		}
		conn, _, err := c.DialStream(t.Context(), addr)
		if err == nil {
			conn.Close()
		}
		check("stream", err)
		c.close()
		srv.Close()
	}
}
