package main_test

// Black-box test of MCP tasks across a cluster (docs/mcp.md#long-calls-tasks): a task is the
// execution record, so a task started on one node is polled, fetched and
// reconciled on the others, and outlives its node. The client is
// mark3labs/mcp-go at 2025-11-25 (an independent implementation of the
// tasks of that version).

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	m3client "github.com/mark3labs/mcp-go/client"
	m3transport "github.com/mark3labs/mcp-go/client/transport"
	m3 "github.com/mark3labs/mcp-go/mcp"

	"github.com/carmyhq/carmy/tests/testutil"
)

// m3Tasks is an mcp-go client of one node, at 2025-11-25.
type m3Tasks struct {
	t  *testing.T
	c  *m3client.Client
	tr *m3transport.StreamableHTTP
	id int64
}

func newM3Tasks(t *testing.T, baseURL string) *m3Tasks {
	t.Helper()
	tr, err := m3transport.NewStreamableHTTP(baseURL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := m3client.NewClient(tr, m3client.WithProtocolVersion("2025-11-25"))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := m3.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = m3.Implementation{Name: "carmy-test-tasks", Version: "v1"}
	res, err := c.Initialize(t.Context(), init)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if res.Capabilities.Tasks == nil || res.Capabilities.Tasks.List == nil || res.Capabilities.Tasks.Cancel == nil {
		t.Errorf("initialize: no tasks capability: %+v", res.Capabilities)
	}
	return &m3Tasks{t: t, c: c, tr: tr, id: 100}
}

// startTask sends a task-augmented tools/call (mcp-go's client has no
// call for it: its transport sends the request) and returns the task.
func (m *m3Tasks) startTask(tool string, args map[string]any, meta map[string]any) m3.Task {
	m.t.Helper()
	m.id++
	params := map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 600000}}
	if meta != nil {
		params["_meta"] = meta
	}
	resp, err := m.tr.SendRequest(m.t.Context(), m3transport.JSONRPCRequest{
		JSONRPC: "2.0", ID: m3.NewRequestId(m.id), Method: "tools/call", Params: params,
	})
	if err != nil || resp.Error != nil {
		m.t.Fatalf("task call of %s: %v %+v", tool, err, resp)
	}
	var created m3.CreateTaskResult
	if err := json.Unmarshal(resp.Result, &created); err != nil {
		m.t.Fatalf("task call of %s: %v: %s", tool, err, resp.Result)
	}
	return created.Task
}

func (m *m3Tasks) get(id string) (*m3.GetTaskResult, error) {
	return m.c.GetTask(m.t.Context(), m3.GetTaskRequest{Params: m3.GetTaskParams{TaskId: id}})
}

func TestBlackBoxMCPTasksThreeNodes(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds the carmy binary and runs a cluster of three processes")
	}
	bin := testutil.BuildCarmy(t)
	c := testutil.StartCluster(t, bin, 3, testutil.StartOptions{}, "--dev", "--fast-failover")
	leader := c.Leader(t, 30*time.Second)
	followers := c.Followers(leader)
	a, b := followers[0], followers[1] // a runs the task and dies
	ca, cb, cl := newM3Tasks(t, a.URL), newM3Tasks(t, b.URL), newM3Tasks(t, leader.URL)

	// A short task started on the leader, its result fetched on a
	// follower (tasks/result waits for it).
	short := cl.startTask("sleep", map[string]any{"ms": 300}, nil)
	res, err := cb.c.TaskResult(t.Context(), m3.TaskResultRequest{Params: m3.TaskResultParams{TaskId: short.TaskId}})
	if err != nil || res.IsError {
		t.Fatalf("tasks/result of %s on %s: %v %+v", short.TaskId, b.ID(), err, res)
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc["slept_ms"] != float64(300) {
		t.Errorf("tasks/result: %+v", res)
	}

	// A long task on a, polled on b and listed there.
	begin := time.Now()
	long := ca.startTask("sleep", map[string]any{"ms": 59000}, map[string]any{"carmy/request_id": "long-1"})
	t.Logf("a 59 s tool called as a task on %s answered its task in %v", a.ID(), time.Since(begin))
	if !strings.HasPrefix(long.TaskId, "exec_") || long.Status != m3.TaskStatusWorking {
		t.Fatalf("the task: %+v", long)
	}
	if got, err := cb.get(long.TaskId); err != nil || got.Status != m3.TaskStatusWorking {
		t.Fatalf("tasks/get on %s: %v %+v", b.ID(), err, got)
	}
	list, err := cb.c.ListTasks(t.Context(), m3.ListTasksRequest{})
	if err != nil || len(list.Tasks) < 2 || list.Tasks[0].TaskId != long.TaskId {
		t.Errorf("tasks/list on %s: %v %+v", b.ID(), err, list)
	}

	// a dies: the task becomes interrupted, which reads working with a
	// message, on every survivor.
	a.Kill()
	testutil.WaitFor(t, 60*time.Second, "the task interrupted on the survivors", func() error {
		for _, m := range []*m3Tasks{cb, cl} {
			got, err := m.get(long.TaskId)
			if err != nil {
				return err
			}
			if got.Status != m3.TaskStatusWorking {
				t.Fatalf("the task after its node died: %+v", got)
			}
			if !strings.Contains(got.StatusMessage, "interrupted") {
				return fmt.Errorf("status message %q", got.StatusMessage)
			}
		}
		return nil
	})
	// Reconciled with the model's tool, on the leader; the result is then
	// what the caller established, on every survivor.
	resolved, err := cl.c.CallTool(t.Context(), m3.CallToolRequest{Params: m3.CallToolParams{
		Name: "carmy.resolve", Arguments: map[string]any{"execution_id": long.TaskId, "status": "completed", "data": map[string]any{"slept_ms": 59000}},
	}})
	if err != nil || resolved.IsError {
		t.Fatalf("carmy.resolve: %v %+v", err, resolved)
	}
	for _, m := range []*m3Tasks{cb, cl} {
		got, err := m.get(long.TaskId)
		if err != nil || got.Status != m3.TaskStatusCompleted {
			t.Errorf("tasks/get after resolve: %v %+v", err, got)
		}
		res, err := m.c.TaskResult(t.Context(), m3.TaskResultRequest{Params: m3.TaskResultParams{TaskId: long.TaskId}})
		if sc, _ := res.StructuredContent.(map[string]any); err != nil || sc["slept_ms"] != float64(59000) {
			t.Errorf("tasks/result after resolve: %v %+v", err, res)
		}
	}

	// tasks/cancel on another node than the one running it.
	run := cl.startTask("sleep", map[string]any{"ms": 59000}, nil)
	cancelled, err := cb.c.CancelTask(t.Context(), m3.CancelTaskRequest{Params: m3.CancelTaskParams{TaskId: run.TaskId}})
	if err != nil || cancelled.Status != m3.TaskStatusCancelled {
		t.Errorf("tasks/cancel on %s of a task of %s: %v %+v", b.ID(), leader.ID(), err, cancelled)
	}
	if _, err := cb.get("exec_0000000000000000000000000000000000"); err == nil {
		t.Error("tasks/get of no task answered")
	}
}
