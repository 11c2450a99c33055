package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster/forward"
	"github.com/carmyhq/carmy/cluster/wire"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// The follower's end of the forward stream is package forward's; these
// tests check what the node adds to it: its dialer (DialStream: the
// upgrade, its credentials, how its refusals read) and the leader's end
// (serveStream).

// newTestForwarder returns a forwarder of a node named "follower", over
// the node's own internal client.
func newTestForwarder(t *testing.T) *forward.Forwarder {
	c := newInternalClient(Config{NodeID: "follower"}, nil)
	f := forward.New(c, fwdObserver{newNodeMetrics()})
	t.Cleanup(func() {
		f.Close()
		c.close()
	})
	return f
}

func forwardOne(t *testing.T, f *forward.Forwarder, addr string, cmd string, wait time.Duration) (fsm.Response, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return f.Apply(ctx, addr, []byte(cmd), time.Now().Add(wait), false)
}

// The upgrade asks for the stream as an internal call: with the cluster
// key, the node's id and its protocol version.
func TestStreamUpgradeNamesTheNode(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == pathStream {
			got <- r.Header.Clone()
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	c := newInternalClient(Config{NodeID: "follower", ClusterKey: "the-cluster-key-0123"}, nil)
	defer c.close()
	if _, _, err := c.DialStream(t.Context(), srv.Listener.Addr().String()); err == nil {
		t.Fatal("a 404 upgraded the connection")
	}
	h := <-got
	if h.Get("Upgrade") != forward.Protocol || h.Get(nodeIDHeader) != "follower" || h.Get(keyHeader) != "the-cluster-key-0123" ||
		h.Get(ProtocolHeader) != protocolString {
		t.Errorf("upgrade headers: %v", h)
	}
}

// A leader that refuses this node's upgrade as a member (403) applied
// nothing: the error says so, and is no unknown outcome.
func TestStreamRefusedAsMember(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeInternalError(w, http.StatusForbidden, wire.Coded(store.CodeForbidden, "missing or wrong cluster key"))
	}))
	defer srv.Close()
	_, err := forwardOne(t, newTestForwarder(t), srv.Listener.Addr().String(), "c", 5*time.Second)
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, wire.ErrRefused) || errors.Is(err, store.ErrCommitUnknown) ||
		!strings.Contains(err.Error(), "wrong cluster key") {
		t.Errorf("refused: %v, want ErrUnavailable and wire.ErrRefused alone", err)
	}
}

// A leader that does not upgrade the connection (404, or any other error
// answer but a refusal) applied nothing: the batch was not sent, its error
// is no unknown outcome, and there is no other way to send it (every
// batch asks for a stream again).
func TestStreamNotUpgradedIsNotSent(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusInternalServerError} {
		var upgrades atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			upgrades.Add(1)
			w.WriteHeader(status)
		}))
		f := newTestForwarder(t)
		for range 3 {
			_, err := forwardOne(t, f, srv.Listener.Addr().String(), "c", 5*time.Second)
			if !errors.Is(err, wire.ErrNotSent) || errors.Is(err, store.ErrCommitUnknown) || errors.Is(err, wire.ErrRefused) {
				t.Errorf("%d: %v, want wire.ErrNotSent alone", status, err)
			}
		}
		srv.Close()
		if upgrades.Load() != 3 {
			t.Errorf("%d: %d upgrades asked, want 3", status, upgrades.Load())
		}
	}
}

// A request to the stream's path that does not ask for the upgrade is
// refused with INVALID_REQUEST, and the connection stays HTTP.
func TestStreamPathNeedsTheUpgrade(t *testing.T) {
	for name, hdr := range map[string]map[string]string{
		"no upgrade":        {},
		"another protocol":  {"Connection": "Upgrade", "Upgrade": "websocket"},
		"upgrade, no conn.": {"Upgrade": forward.Protocol},
	} {
		req := httptest.NewRequest(http.MethodPost, pathStream, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		(&Node{}).serveStream(rec, req)
		var we wire.Error
		if err := json.Unmarshal(rec.Body.Bytes(), &we); err != nil || rec.Code != http.StatusBadRequest || we.Code != store.CodeInvalidRequest {
			t.Errorf("%s: %d %s (%v), want 400 INVALID_REQUEST", name, rec.Code, rec.Body.String(), err)
		}
	}
}

// Opening a stream gives up when its context ends (the forwarder
// closing), even while the leader holds the upgrade unanswered: closing a
// node does not wait on a silent leader.
func TestStreamUpgradeEndsWithItsContext(t *testing.T) {
	release := make(chan struct{})
	accepted := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		accepted <- struct{}{}
		<-release
	}))
	defer srv.Close()
	defer close(release) // before Close, which waits for the handler
	c := newInternalClient(Config{NodeID: "follower"}, nil)
	defer c.close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := c.DialStream(ctx, srv.Listener.Addr().String())
		done <- err
	}()
	<-accepted
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, wire.ErrNotSent) {
			t.Errorf("err = %v, want wire.ErrNotSent", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("DialStream still waits for the upgrade's answer after its context ended")
	}
}

// A command over wire.MaxCommandBytes is refused before it is proposed or
// forwarded, on any node alike: no leader could take it.
func TestCommandOverTheLimitIsRefused(t *testing.T) {
	if err := checkSize(fsm.TypeComplete, make([]byte, wire.MaxCommandBytes)); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	err := checkSize(fsm.TypeComplete, make([]byte, wire.MaxCommandBytes+1))
	if !errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrCommitUnknown) || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("err = %v, want ErrInvalid: over the limit", err)
	}
}
