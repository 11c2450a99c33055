package mcpgateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// pidOf reads the process id the stdio server wrote (0 before it has).
func pidOf(t *testing.T, path string) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(string(raw))
	return pid
}

// exited reports whether the process pid is gone (or a zombie).
func exited(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	return strings.HasPrefix(after, "Z")
}

// callEventually calls req until the upstream's group is available (it
// answers UNAVAILABLE while a child is replaced).
func callEventually(t *testing.T, rt *engine.Runtime, req engine.Request) engine.Response {
	t.Helper()
	var resp engine.Response
	testutil.WaitFor(t, 30*time.Second, "calling "+req.Tool, func() error {
		var err error
		resp, err = rt.Call(t.Context(), alice, req)
		return err
	})
	return resp
}

// TestStdioChildEnvironment: a stdio child gets PATH and the variables
// its config names, nothing of the node's environment (its secrets, its
// tokens), runs in its own directory, and holds no file of the node's;
// the values of env are secrets, redacted from what it answers.
func TestStdioChildEnvironment(t *testing.T) {
	bin := stdioServer(t)
	t.Setenv("CARMY_TEST_SECRET", "node-SECRET-4b7e")
	t.Setenv("CARMY_ADMIN_TOKEN", "admin-SECRET-90aa")
	dir := t.TempDir()
	// A file the node holds without close-on-exec, as one inherited from
	// a shell or a supervisor would be.
	private := filepath.Join(t.TempDir(), "node-private")
	if err := os.WriteFile(private, []byte("private"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(private, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	rt := newRuntime(t)
	startUpstream(t, rt, mcpgateway.Config{Name: "local", Command: []string{bin},
		Env: map[string]string{"UPSTREAM_KEY": "upstream-SECRET-1d2c", "MODE": "dev"}, Dir: dir})
	waitTool(t, rt, "local.env")
	resp := mustCall(t, rt, engine.Request{Tool: "local.env", RequestID: "env-1"})
	if resp.Record.Status != store.StatusCompleted {
		t.Fatalf("env: %s %s", resp.Record.Status, resp.Record.Error)
	}
	var got struct {
		Env []string
		Cwd string
		Fds []string
	}
	if err := json.Unmarshal(resp.Record.Data, &got); err != nil {
		t.Fatal(err)
	}
	raw := string(resp.Record.Data)
	for _, s := range []string{"SECRET", "CARMY_"} {
		if strings.Contains(raw, s) {
			t.Errorf("the child's answer holds %q: %s", s, raw)
		}
	}
	var names []string
	for _, kv := range got.Env {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"MODE", "UPSTREAM_KEY"}
	if _, ok := os.LookupEnv("PATH"); ok {
		want = []string{"MODE", "PATH", "UPSTREAM_KEY"}
	}
	if !slices.Equal(names, want) || !slices.Contains(got.Env, "MODE=dev") || !slices.Contains(got.Env, "UPSTREAM_KEY=[redacted]") {
		t.Errorf("the child's environment: %q, want the variables %q (the key redacted)", got.Env, want)
	}
	if got.Cwd != dir {
		t.Errorf("the child runs in %s, want %s", got.Cwd, dir)
	}
	for _, open := range got.Fds {
		num, target, _ := strings.Cut(open, " ")
		if n, _ := strconv.Atoi(num); n <= 2 {
			continue
		}
		// Besides its own (the Go runtime's epoll, eventfd and cgroup
		// files, the directory read), nothing: no file, pipe or socket
		// of the node's.
		if target == private || strings.HasPrefix(target, "pipe:") || strings.HasPrefix(target, "socket:") {
			t.Errorf("the child holds file descriptor %s", open)
		}
	}
}

// TestStdioOversizeLine: a stdio answer longer than the bound is the
// call's RESULT_TOO_LARGE, the child that sent it is replaced, and the
// upstream serves the next call; an answer within the bound is served.
func TestStdioOversizeLine(t *testing.T) {
	bin := stdioServer(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	rt := newRuntime(t) // its result limit: 1 MiB
	startUpstream(t, rt, mcpgateway.Config{Name: "local", Command: []string{bin, "-pid", pidFile}, MaxAnswerBytes: 64 << 10})
	waitTool(t, rt, "local.huge")
	first := pidOf(t, pidFile)

	small := mustCall(t, rt, engine.Request{Tool: "local.huge", RequestID: "h-small", Arguments: json.RawMessage(`{"bytes":30000}`)})
	if small.Record.Status != store.StatusCompleted {
		t.Fatalf("an answer within the bound: %s %s", small.Record.Status, small.Record.Error)
	}
	big := mustCall(t, rt, engine.Request{Tool: "local.huge", RequestID: "h-big", Arguments: json.RawMessage(`{"bytes":200000}`)}).Record
	if code, msg := errorOf(t, big.Error); big.Status != store.StatusFailed || code != engine.CodeResultTooLarge {
		t.Fatalf("an answer past the bound: %s %s %s", big.Status, code, msg)
	}
	requireReplaced(t, rt, pidFile, first, "after")
}

// TestStdioHungChildReplaced: a child that stops answering altogether
// (it reads and writes nothing more) during a call: the call times out,
// the child does not answer the ping that follows within the grace, so it
// is killed and replaced, and the next call is served by the new one.
func TestStdioHungChildReplaced(t *testing.T) {
	t.Parallel()
	bin := stdioServer(t)
	dir := t.TempDir()
	pidFile, countFile := filepath.Join(dir, "pid"), filepath.Join(dir, "count")
	rt := newRuntime(t)
	logs := &logBuffer{}
	startUpstream(t, rt, mcpgateway.Config{Name: "local", Command: []string{bin, "-pid", pidFile, "-count", countFile},
		Timeout: time.Second, CancelGrace: 500 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer func() {
		if t.Failed() {
			t.Logf("log:\n%s", logs)
		}
	}()
	waitTool(t, rt, "local.freeze")
	first := pidOf(t, pidFile)
	frozen := mustCall(t, rt, engine.Request{Tool: "local.freeze", RequestID: "f-1"}).Record
	if frozen.Status != store.StatusTimedOut {
		t.Fatalf("a call of a frozen child: %s %s %s", frozen.Status, frozen.Data, frozen.Error)
	}
	requireReplaced(t, rt, pidFile, first, "c-1")
}

// requireReplaced waits until the child whose pid was first has exited
// and another has taken its place, and checks that the new one serves a
// call (with request_id id).
func requireReplaced(t *testing.T, rt *engine.Runtime, pidFile string, first int, id string) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "the child replaced", func() error {
		if pid := pidOf(t, pidFile); pid == first || !exited(first) {
			return fmt.Errorf("pid %d (first %d, exited %v)", pid, first, exited(first))
		}
		return nil
	})
	next := callEventually(t, rt, engine.Request{Tool: "local.create", RequestID: id, Arguments: json.RawMessage(`{"sku":"Z"}`)})
	if next.Record.Status != store.StatusCompleted {
		t.Fatalf("after the replacement: %s %s", next.Record.Status, next.Record.Error)
	}
}

// TestStdioCallsNotSerialised: with one call hanging in the child (it
// ignores its cancellation), other calls of the same child are served;
// the hung call's timeout sends notifications/cancelled, which a tool
// that heeds it sees; and a child that answers the ping after a timeout
// is kept.
func TestStdioCallsNotSerialised(t *testing.T) {
	bin := stdioServer(t)
	dir := t.TempDir()
	pidFile, countFile := filepath.Join(dir, "pid"), filepath.Join(dir, "count")
	rt := newRuntime(t)
	startUpstream(t, rt, mcpgateway.Config{Name: "local", Command: []string{bin, "-pid", pidFile, "-count", countFile},
		Timeout: 2 * time.Second, CancelGrace: 500 * time.Millisecond})
	waitTool(t, rt, "local.hang")
	first := pidOf(t, pidFile)
	hung := make(chan store.Record, 1)
	go func() {
		resp, err := rt.Call(context.Background(), alice, engine.Request{Tool: "local.hang", RequestID: "hang-1"})
		if err != nil {
			t.Errorf("hang: %v", err)
		}
		hung <- resp.Record
	}()
	testutil.WaitFor(t, 30*time.Second, "the hanging call started", func() error {
		if !slices.Contains(lines(t, countFile), "hang|hang-1") {
			return fmt.Errorf("executions %q", lines(t, countFile))
		}
		return nil
	})
	for i := range 3 {
		resp := mustCall(t, rt, engine.Request{Tool: "local.create", RequestID: fmt.Sprint("beside-", i), Arguments: json.RawMessage(`{"sku":"B"}`)})
		if resp.Record.Status != store.StatusCompleted {
			t.Fatalf("a call beside the hung one: %s %s", resp.Record.Status, resp.Record.Error)
		}
	}
	select {
	case rec := <-hung:
		t.Fatalf("the hung call ended before the calls beside it: %s", rec.Status)
	default:
	}
	if rec := <-hung; rec.Status != store.StatusTimedOut {
		t.Fatalf("the hung call: %s %s", rec.Status, rec.Error)
	}

	waited := mustCall(t, rt, engine.Request{Tool: "local.wait", RequestID: "w-1", Timeout: 300 * time.Millisecond}).Record
	if waited.Status != store.StatusTimedOut {
		t.Fatalf("wait: %s %s", waited.Status, waited.Error)
	}
	testutil.WaitFor(t, 30*time.Second, "notifications/cancelled seen upstream", func() error {
		if !slices.Contains(lines(t, countFile), "cancelled|w-1") {
			return fmt.Errorf("executions %q", lines(t, countFile))
		}
		return nil
	})
	// The child answered its pings: it is the same child still.
	resp := mustCall(t, rt, engine.Request{Tool: "local.create", RequestID: "last", Arguments: json.RawMessage(`{"sku":"C"}`)})
	if resp.Record.Status != store.StatusCompleted || pidOf(t, pidFile) != first {
		t.Fatalf("a child that answers was replaced (pid %d, first %d): %s", pidOf(t, pidFile), first, resp.Record.Status)
	}
}
