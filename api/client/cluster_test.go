package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/api/wire"
	"github.com/carmyhq/carmy/tests/testutil"
)

// members is an api.Cluster of its own members, below the real API
// server.
type members struct {
	mu    sync.Mutex
	nodes []wire.ClusterNode
}

func (m *members) Status(context.Context) (api.ClusterStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := api.ClusterStatus{Nodes: slices.Clone(m.nodes), CommitIndex: 7, AppliedIndex: 7, Entries: 2, Capacity: 100}
	if len(m.nodes) > 0 {
		st.Leader = &wire.ClusterLeader{ID: m.nodes[0].ID, HTTPAddr: m.nodes[0].HTTPAddr}
	}
	return st, nil
}

func (m *members) AddNode(_ context.Context, n api.NodeSpec) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes = append(m.nodes, wire.ClusterNode{ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr, Suffrage: "Voter"})
	return nil
}

func (m *members) RemoveNode(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.nodes, func(n wire.ClusterNode) bool { return n.ID == id })
	if i < 0 {
		return &api.Error{Code: "NOT_FOUND", Message: "no member " + id}
	}
	m.nodes = slices.Delete(m.nodes, i, i+1)
	return nil
}

// ClusterStatus, AddNode and RemoveNode speak the API's wire types with a
// real server, and keep the answer as it came.
func TestClusterAdministration(t *testing.T) {
	m := &members{nodes: []wire.ClusterNode{{ID: "n1", RaftAddr: "10.0.0.1:8300", HTTPAddr: "10.0.0.1:8080", Suffrage: "Voter"}}}
	base := "http://" + testutil.Serve(t, newNode(t), api.Config{Cluster: m})
	c, _ := newClient(t, base)

	st, err := c.ClusterStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader == nil || st.Leader.ID != "n1" || len(st.Nodes) != 1 || st.CommitIndex != 7 || st.Capacity != 100 {
		t.Fatalf("status = %+v, want n1 leading alone", st.ClusterStatus)
	}
	var again wire.ClusterStatus
	if err := json.Unmarshal(st.Raw, &again); err != nil || again.Leader == nil || again.Leader.ID != "n1" {
		t.Fatalf("Raw = %s (%v), want the answer", st.Raw, err)
	}

	st, err = c.AddNode(t.Context(), wire.NodeSpec{ID: "n2", RaftAddr: "10.0.0.2:8300", HTTPAddr: "10.0.0.2:8080"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 2 || st.Nodes[1] != (wire.ClusterNode{ID: "n2", RaftAddr: "10.0.0.2:8300", HTTPAddr: "10.0.0.2:8080", Suffrage: "Voter"}) {
		t.Fatalf("after AddNode: nodes %+v, want n2 added", st.Nodes)
	}

	st, err = c.RemoveNode(t.Context(), "n2")
	if err != nil || len(st.Nodes) != 1 {
		t.Fatalf("RemoveNode = %+v, %v; want n1 alone", st, err)
	}
	_, err = c.RemoveNode(t.Context(), "n2")
	ae := asAPIError(t, err)
	if ae.Status != http.StatusNotFound || !errors.Is(err, client.ErrNotFound) || len(ae.Body) == 0 {
		t.Fatalf("RemoveNode of a non-member: %v (body %q), want 404 NOT_FOUND with its body", err, ae.Body)
	}

	for _, err := range []error{
		func() error { _, err := c.AddNode(t.Context(), wire.NodeSpec{ID: "n3"}); return err }(),
		func() error { _, err := c.RemoveNode(t.Context(), ""); return err }(),
	} {
		if !errors.Is(err, client.ErrInvalid) {
			t.Errorf("err = %v, want ErrInvalid", err)
		}
	}
}

// A node that is not part of a cluster answers 404, and a success that is
// not a status is a *ProtocolError that keeps the body.
func TestClusterStatusErrors(t *testing.T) {
	c, cnt := newClient(t, startNode(t), client.WithRetry(fastRetry))
	_, err := c.ClusterStatus(t.Context())
	if ae := asAPIError(t, err); ae.Status != http.StatusNotFound {
		t.Fatalf("ClusterStatus of a node without a cluster: %v, want 404", err)
	}
	if n := cnt.n.Load(); n != 1 {
		t.Errorf("%d requests, want 1: NOT_FOUND is not retried", n)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>hello</html>"))
	}))
	t.Cleanup(srv.Close)
	c, _ = newClient(t, srv.URL)
	_, err = c.ClusterStatus(t.Context())
	var pe *client.ProtocolError
	if !errors.As(err, &pe) || pe.Status != http.StatusOK || string(pe.Body) != "<html>hello</html>" {
		t.Fatalf("err = %v, want a *ProtocolError of a 200 with its body", err)
	}
}
