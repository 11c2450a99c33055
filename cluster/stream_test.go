package cluster

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster/forward"
	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// The follower's end of the forward stream is package forward's, and its
// dialer (peer.Client.DialStream) package peer's; these tests check how
// the node's forwarder reads a leader's refusals through them.

// newTestForwarder returns a forwarder of a node named "follower", over
// a node's peer client.
func newTestForwarder(t *testing.T) *forward.Forwarder {
	c := peer.NewClient(peer.ClientConfig{NodeID: "follower"})
	f := forward.New(c, fwdObserver{newNodeMetrics()})
	t.Cleanup(func() {
		f.Close()
		c.Close()
	})
	return f
}

func forwardOne(t *testing.T, f *forward.Forwarder, addr string, cmd string, wait time.Duration) (fsm.Response, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return f.Apply(ctx, addr, []byte(cmd), time.Now().Add(wait), false)
}

// A leader that refuses this node's upgrade as a member (403) applied
// nothing: the error says so, and is no unknown outcome.
func TestStreamRefusedAsMember(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		peer.WriteError(w, http.StatusForbidden, peer.Coded(store.CodeForbidden, "missing or wrong cluster key"))
	}))
	defer srv.Close()
	_, err := forwardOne(t, newTestForwarder(t), srv.Listener.Addr().String(), "c", 5*time.Second)
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, peer.ErrRefused) || errors.Is(err, store.ErrCommitUnknown) ||
		!strings.Contains(err.Error(), "wrong cluster key") {
		t.Errorf("refused: %v, want ErrUnavailable and peer.ErrRefused alone", err)
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
			if !errors.Is(err, peer.ErrNotSent) || errors.Is(err, store.ErrCommitUnknown) || errors.Is(err, peer.ErrRefused) {
				t.Errorf("%d: %v, want peer.ErrNotSent alone", status, err)
			}
		}
		srv.Close()
		if upgrades.Load() != 3 {
			t.Errorf("%d: %d upgrades asked, want 3", status, upgrades.Load())
		}
	}
}

// A command over peer.MaxCommandBytes is refused before it is proposed or
// forwarded, on any node alike: no leader could take it.
func TestCommandOverTheLimitIsRefused(t *testing.T) {
	if err := checkSize(fsm.TypeComplete, make([]byte, peer.MaxCommandBytes)); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	err := checkSize(fsm.TypeComplete, make([]byte, peer.MaxCommandBytes+1))
	if !errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrCommitUnknown) || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("err = %v, want ErrInvalid: over the limit", err)
	}
}
