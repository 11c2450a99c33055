package peer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/fsm"
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

// fakeServer is a Server that records what it was asked.
type fakeServer struct {
	mu      sync.Mutex
	actors  []string // store.ActorFrom of each call's context
	removed []string
}

func (f *fakeServer) saw(r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actors = append(f.actors, store.ActorFrom(r.Context()))
}

func (f *fakeServer) Stream(_ *http.Request, conn net.Conn, _ *bufio.ReadWriter) { _ = conn.Close() }

func (f *fakeServer) ReadIndex(r *http.Request) (uint64, error) { f.saw(r); return 42, nil }

func (f *fakeServer) Join(r *http.Request, info fsm.NodeInfo) ([]fsm.NodeInfo, error) {
	f.saw(r)
	if info.ID == "taken" {
		return nil, fmt.Errorf("%w: a live member has this id", store.ErrInvalidState)
	}
	return []fsm.NodeInfo{info, {ID: "leader"}}, nil
}

func (f *fakeServer) Remove(r *http.Request, id string) error {
	f.saw(r)
	if id != "n2" {
		return fmt.Errorf("%w: no member %s", store.ErrNotFound, id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	return nil
}

func (f *fakeServer) State(*http.Request) (StateDigest, error) {
	return StateDigest{AppliedIndex: 7, Hash: "h"}, nil
}

func (f *fakeServer) Silence(_ *http.Request, check bool) LogPosition {
	if check {
		return LogPosition{LastTerm: 2, LastIndex: 9}
	}
	return LogPosition{LastTerm: 1, LastIndex: 3}
}

// A Client calling a Handler gets each Server answer as it was given, and
// each Server error as the same store error; the actor of the caller's
// context reaches the Server's.
func TestClientAndHandlerRoundTrip(t *testing.T) {
	const key = "round-trip-cluster-key"
	f := &fakeServer{}
	srv := httptest.NewServer(Handler(f, Guard{ClusterKey: key}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	c := NewClient(ClientConfig{NodeID: "n1", ClusterKey: key})
	defer c.Close()
	ctx := store.WithActor(t.Context(), "alice")

	if idx, err := c.ReadIndex(ctx, addr); err != nil || idx != 42 {
		t.Errorf("ReadIndex = %d, %v; want 42", idx, err)
	}
	nodes, err := c.Join(ctx, addr, fsm.NodeInfo{ID: "n3", RaftAddr: "r", HTTPAddr: "h"})
	if err != nil || len(nodes) != 2 || nodes[0].ID != "n3" || nodes[1].ID != "leader" {
		t.Errorf("Join = %v, %v; want n3 and the leader", nodes, err)
	}
	if _, err := c.Join(ctx, addr, fsm.NodeInfo{ID: "taken"}); !errors.Is(err, store.ErrInvalidState) {
		t.Errorf("Join of a taken id: %v, want store.ErrInvalidState", err)
	}
	if err := c.Remove(ctx, addr, "n2"); err != nil {
		t.Errorf("Remove: %v", err)
	}
	if err := c.Remove(ctx, addr, "n9"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Remove of no member: %v, want store.ErrNotFound", err)
	}
	if d, err := c.State(ctx, addr); err != nil || d.AppliedIndex != 7 || d.Hash != "h" {
		t.Errorf("State = %+v, %v", d, err)
	}
	if pos, err := c.Silence(ctx, addr, true); err != nil || pos != (LogPosition{LastTerm: 2, LastIndex: 9}) {
		t.Errorf("Silence(check) = %+v, %v", pos, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, a := range f.actors {
		if a != "alice" {
			t.Errorf("call %d reached the server with actor %q, want alice", i, a)
		}
	}
	if len(f.actors) != 5 || len(f.removed) != 1 {
		t.Errorf("the server saw %d calls (%d removals), want 5 (1)", len(f.actors), len(f.removed))
	}
}

// A member (it holds the key) that names another protocol version, or
// none, is refused with 403 and an error naming both versions, logged in
// the refusal log; GET state may go without one. Every answer names this
// node's version.
func TestCallOfAnotherProtocolIsRefused(t *testing.T) {
	const key = "protocol-test-cluster-key"
	var logs syncBuffer
	g := Guard{ClusterKey: key, Refusals: nodeauth.NewRefusals(slog.New(slog.NewTextHandler(&logs, nil)))}
	reached := 0
	h := g.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached++
		w.WriteHeader(http.StatusOK)
	}))
	call := func(method, path, version string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(`{}`))
		req.Header.Set(KeyHeader, key)
		if version != "" {
			req.Header.Set(ProtocolHeader, version)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get(ProtocolHeader); got != Protocol {
			t.Errorf("%s %s (version %q): answer names version %q, want %s", method, path, version, got, Protocol)
		}
		return rec
	}
	if rec := call(http.MethodPost, PathJoin, "3"); rec.Code != http.StatusForbidden ||
		!strings.Contains(rec.Body.String(), "speaks node protocol 3, this node 2") || !strings.Contains(rec.Body.String(), `"code":"FORBIDDEN"`) {
		t.Errorf("version 3: %d %s, want 403 naming both versions", rec.Code, rec.Body.String())
	}
	if !strings.Contains(logs.String(), "refused a peer: internal call of another node protocol version") ||
		!strings.Contains(logs.String(), "speaks node protocol 3, this node 2") {
		t.Errorf("the refusal is not logged with both versions:\n%s", logs.String())
	}
	if rec := call(http.MethodPost, PathStream, ""); rec.Code != http.StatusForbidden ||
		!strings.Contains(rec.Body.String(), "speaks node protocol none, this node 2") {
		t.Errorf("no version: %d %s, want 403", rec.Code, rec.Body.String())
	}
	if reached != 0 {
		t.Fatalf("the handler was reached %d times by refused calls", reached)
	}
	if rec := call(http.MethodGet, PathState, ""); rec.Code != http.StatusOK {
		t.Errorf("GET state without a version: %d, want 200", rec.Code)
	}
	if rec := call(http.MethodGet, PathState, "3"); rec.Code != http.StatusForbidden {
		t.Errorf("GET state of version 3: %d, want 403", rec.Code)
	}
	if rec := call(http.MethodPost, PathJoin, Protocol); rec.Code != http.StatusOK || reached != 2 {
		t.Errorf("this version: %d (handler reached %d times), want 200", rec.Code, reached)
	}
}

// A guard with neither a key nor node TLS lets nobody through.
func TestGuardWithoutCredentialsRefusesAll(t *testing.T) {
	h := Guard{}.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("a call passed a guard without credentials")
	}))
	req := httptest.NewRequest(http.MethodPost, PathJoin, strings.NewReader(`{}`))
	req.Header.Set(ProtocolHeader, Protocol)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("%d, want 403", rec.Code)
	}
}

// A request to the stream's path that does not ask for the upgrade is
// refused with INVALID_REQUEST, and the connection stays HTTP.
func TestStreamPathNeedsTheUpgrade(t *testing.T) {
	for name, hdr := range map[string]map[string]string{
		"no upgrade":        {},
		"another protocol":  {"Connection": "Upgrade", "Upgrade": "websocket"},
		"upgrade, no conn.": {"Upgrade": StreamProtocol},
	} {
		req := httptest.NewRequest(http.MethodPost, PathStream, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		serveStream(&fakeServer{}, rec, req)
		var we Error
		if err := json.Unmarshal(rec.Body.Bytes(), &we); err != nil || rec.Code != http.StatusBadRequest || we.Code != store.CodeInvalidRequest {
			t.Errorf("%s: %d %s (%v), want 400 INVALID_REQUEST", name, rec.Code, rec.Body.String(), err)
		}
	}
}
