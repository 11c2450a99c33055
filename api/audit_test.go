package api_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// syncBuffer is a log sink safe for the server's goroutines.
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

type fakeCluster struct{}

func (fakeCluster) Status(context.Context) (api.ClusterStatus, error) {
	return api.ClusterStatus{}, nil
}
func (fakeCluster) AddNode(context.Context, api.NodeSpec) error { return nil }
func (fakeCluster) RemoveNode(context.Context, string) error    { return store.ErrNotFound }

// TestAuditLogsAdminActions checks that every action that changes the
// cluster or an execution's fate leaves one audit line with its action,
// principal, target and outcome, refusals included, and is counted.
func TestAuditLogsAdminActions(t *testing.T) {
	logs := &syncBuffer{}
	cfg := authConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.Cluster = fakeCluster{}
	rec := completedRecord()
	rt := &fakeRuntime{tb: t,
		// planner's allow-list is checked against the execution's tool.
		execution: func(context.Context, engine.Caller, string) (store.Record, error) { return rec, nil },
		cancel:    func(context.Context, engine.Caller, string) (store.Record, error) { return rec, nil },
		resolve: func(context.Context, engine.Caller, string, engine.Resolution) (store.Record, error) {
			return rec, nil
		},
	}
	srv := newTestServer(t, rt, cfg)
	admin := []string{"Authorization", "Bearer " + adminToken}
	planner := []string{"Authorization", "Bearer " + plannerToken}

	post(t, srv, "/v1/cluster/nodes", `{"id":"n4","raft_addr":"10.0.0.4:8300","http_addr":"10.0.0.4:8080"}`, admin...)
	post(t, srv, "/v1/cluster/nodes", `{"id":"n5","raft_addr":"10.0.0.5:8300","http_addr":"10.0.0.5:8080"}`, planner...)
	send(t, srv, request{method: http.MethodDelete, path: "/v1/cluster/nodes/n9", header: map[string]string{"Authorization": "Bearer " + adminToken}})
	post(t, srv, "/v1/executions/exec_1/cancel", ``, planner...)
	post(t, srv, "/v1/executions/exec_2/resolve", `{"status":"released"}`, planner...)
	post(t, srv, "/v1/executions/exec_3/resolve", `{"status":"completed","data":1}`)

	want := []string{
		`action=join principal=admin target="n4 raft=10.0.0.4:8300 http=10.0.0.4:8080" outcome=ok status=200`,
		`action=join principal=planner target="" outcome=FORBIDDEN status=403`,
		`action=remove principal=admin target=n9 outcome=NOT_FOUND status=404`,
		`action=cancel principal=planner target=exec_1 outcome=ok status=200`,
		`action=release principal=planner target=exec_2 outcome=ok status=200`,
		`action=resolve principal=- target=exec_3 outcome=UNAUTHORIZED status=401`,
	}
	got := logs.String()
	for _, w := range want {
		if !strings.Contains(got, `msg=audit `+w) {
			t.Errorf("no audit line with %s; logs:\n%s", w, got)
		}
	}
	m := scrape(t, get(t, srv, "/metrics"))
	for series, n := range map[string]float64{
		`carmy_admin_actions_total{action="join",outcome="ok"}`:              1,
		`carmy_admin_actions_total{action="join",outcome="FORBIDDEN"}`:       1,
		`carmy_admin_actions_total{action="release",outcome="ok"}`:           1,
		`carmy_admin_actions_total{action="resolve",outcome="UNAUTHORIZED"}`: 1,
	} {
		if m[series] != n {
			t.Errorf("%s = %v, want %v", series, m[series], n)
		}
	}
}
