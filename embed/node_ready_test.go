package embed_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/embed"
)

// mustBeReady waits, up to 30 s, for n.Ready to close; it fails the test
// when the node stops first or the time passes.
func mustBeReady(t *testing.T, n *embed.Node) {
	t.Helper()
	select {
	case <-n.Ready():
	case <-n.Done():
		t.Fatalf("the node at %s stopped before it was ready", n.Addr())
	case <-time.After(30 * time.Second):
		t.Fatalf("the node at %s not ready after 30 s", n.Addr())
	}
}

// callOnce makes one call of the tool count on n, over plain HTTP and
// without a retry, and returns the answer's status and error code.
func callOnce(t *testing.T, n *embed.Node, requestID string) (int, string) {
	t.Helper()
	body := `{"tool":"count","arguments":{},"request_id":"` + requestID + `"}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+n.Addr().String()+"/v1/tools/call", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("call on %s: %v", n.Addr(), err)
	}
	defer resp.Body.Close()
	var out struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out.Error.Code
}

// TestReadyClosesWhenACallCanSucceed: a member with no cluster yet
// (neither Bootstrap nor Join) accepts connections, and answers calls 503
// UNAVAILABLE, while Ready stays open; once a leader adds it, Ready
// closes and the first call made after it succeeds, without a retry. The
// founder's Ready, likewise, is closed only when a call on it succeeds.
func TestReadyClosesWhenACallCanSucceed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a 2-node Raft cluster")
	}
	var runs atomic.Int64
	waiting := startMember(t, "n2", &runs, func(*cluster.Config) {})
	if status, code := callOnce(t, waiting, "before"); status != http.StatusServiceUnavailable || code != "UNAVAILABLE" {
		t.Fatalf("a call on a member of no cluster answered %d %s, want 503 UNAVAILABLE", status, code)
	}
	select {
	case <-waiting.Ready():
		t.Fatal("Ready is closed on a member of no cluster, whose calls answer 503")
	default:
	}

	founder := startEmbedded(t, "n1", "", &runs)
	mustBeReady(t, founder)
	if status, code := callOnce(t, founder, "on-founder"); status != http.StatusOK {
		t.Fatalf("the first call on the founder after Ready answered %d %s, want 200", status, code)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := founder.Raft().AddNode(ctx, waiting.Raft().Info()); err != nil {
		t.Fatalf("adding n2: %v", err)
	}
	mustBeReady(t, waiting)
	if status, code := callOnce(t, waiting, "after"); status != http.StatusOK {
		t.Fatalf("the first call on n2 after Ready answered %d %s, want 200", status, code)
	}
	if got := runs.Load(); got != 2 {
		t.Errorf("the tool ran %d times, want 2 (one call on each node)", got)
	}
}
