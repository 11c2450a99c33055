package api_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// Tests of when a task call is answered with its task: once its tool's
// request has left the node, never for an execution that is then
// released because its request was never sent (docs/mcp.md, Tasks).

// httpToolSpec is an HTTP tool named name calling url, as a configured one
// is registered (MarksSent).
func httpToolSpec(t *testing.T, name, url string) carmy.ToolSpec {
	t.Helper()
	fn, err := carmy.HTTPTool{URL: url, Logger: quietLogger()}.Func()
	if err != nil {
		t.Fatal(err)
	}
	return carmy.ToolSpec{Name: name, Func: fn, Timeout: time.Minute, MarksSent: true}
}

// taskCall is the body of a task-augmented tools/call of tool with
// request_id rid at version.
func taskCall(version, tool, rid string) string {
	if version >= v0728 {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},"_meta":{"carmy/request_id":"` + rid + `",` + tasksExt + `}}}`
	}
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},"task":{},"_meta":{"carmy/request_id":"` + rid + `"}}}`
}

// taskOfAnswer returns the task a task call was answered with, or nil
// when it was answered with a result.
func taskOfAnswer(version string, res map[string]any) map[string]any {
	if version >= v0728 {
		if res["resultType"] == "task" {
			return res
		}
		return nil
	}
	tk, _ := res["task"].(map[string]any)
	return tk
}

// lookupStatus is the HTTP status of GET /v1/executions?request_id=rid.
func lookupStatus(t *testing.T, base, rid string) int {
	t.Helper()
	resp, err := http.Get(base + "/v1/executions?request_id=" + rid)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestMCPTaskNeverSentRefused: a task call of an HTTP tool whose upstream
// refuses the connection is answered as a plain call is — the UNAVAILABLE
// refusal, no task — and nothing is recorded; once the upstream listens,
// the retry with the same request_id runs the tool. At 2025-11-25
// (params.task) and at 2026-07-28 (the tasks extension).
func TestMCPTaskNeverSentRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the port now refuses connections
	_, base := startOASNode(t, api.Config{}, httpToolSpec(t, "down", "http://"+addr+"/run"))

	for _, version := range []string{v1125, v0728} {
		rid := "never-sent-" + version
		_, msg := rpc(t, base, "", version, taskCall(version, "down", rid))
		res := result(t, "task call at "+version, msg)
		if tk := taskOfAnswer(version, res); tk != nil {
			t.Errorf("at %s: a call never sent was answered with a task: %v", version, res)
			if id, _ := tk["taskId"].(string); id != "" {
				_, got := rpc(t, base, "", version, `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"`+id+`","_meta":{`+tasksExt+`}}}`)
				t.Logf("at %s: tasks/get of that task: %v", version, got)
			}
			continue
		}
		if res["isError"] != true || metaOf(res)["carmy/error_code"] != "UNAVAILABLE" {
			t.Errorf("at %s: %v; want the UNAVAILABLE refusal", version, res)
		}
		if sc, _ := res["structuredContent"].(map[string]any); sc != nil {
			if e, _ := sc["error"].(map[string]any); e["tool_ran"] == true {
				t.Errorf("at %s: the refusal says the tool ran: %v", version, e)
			}
		}
		if code := lookupStatus(t, base, rid); code != http.StatusNotFound {
			t.Errorf("at %s: a call never sent left a record: lookup %d, want 404", version, code)
		}
	}

	// The upstream comes up on the same port: the retries run.
	var hits atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	if up.Listener, err = net.Listen("tcp", addr); err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	up.Start()
	defer up.Close()
	for _, version := range []string{v1125, v0728} {
		rid := "never-sent-" + version
		_, msg := rpc(t, base, "", version, taskCall(version, "down", rid))
		res := result(t, "retry at "+version, msg)
		if taskOfAnswer(version, res) == nil && res["isError"] == true {
			t.Errorf("at %s: the retry: %v; want it run", version, res)
			continue
		}
		wait.Until(t, 30*time.Second, "the retry at "+version+" to be recorded", func() bool {
			return lookupStatus(t, base, rid) == http.StatusOK
		})
	}
	// A task's record exists from its reservation, before the tool's
	// request leaves: wait for the requests themselves.
	wait.Until(t, 30*time.Second, "the upstream to get both retries' requests", func() bool {
		return hits.Load() >= 2
	})
	if n := hits.Load(); n != 2 {
		t.Errorf("the upstream got %d requests, want 2 (one per retry)", n)
	}
}

// TestMCPTaskAnsweredWhileHTTPToolRuns: a task call of an HTTP tool whose
// upstream takes the request and holds it is answered with its task,
// working, while the upstream still holds it.
func TestMCPTaskAnsweredWhileHTTPToolRuns(t *testing.T) {
	got, release := make(chan struct{}, 4), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer up.Close()
	defer close(release)
	_, base := startOASNode(t, api.Config{}, httpToolSpec(t, "held", up.URL))

	for _, version := range []string{v1125, v0728} {
		_, msg := rpc(t, base, "", version, taskCall(version, "held", "held-"+version))
		res := result(t, "task call at "+version, msg)
		tk := taskOfAnswer(version, res)
		if tk == nil || tk["status"] != "working" || !strings.HasPrefix(tk["taskId"].(string), "exec_") {
			t.Fatalf("at %s: %v; want a working task", version, res)
		}
		select {
		case <-got:
		case <-time.After(30 * time.Second):
			t.Fatalf("at %s: the upstream never got the request", version)
		}
	}
}
