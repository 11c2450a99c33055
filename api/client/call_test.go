package client_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/tests/testutil"
)

func TestCallThenReplay(t *testing.T) {
	base := startNode(t)
	c, cnt := newClient(t, base)
	ctx := t.Context()

	first, err := c.Call(ctx, "echo", map[string]any{"a": 1}, client.RequestID("r1"), client.Session("s1"),
		client.Metadata(json.RawMessage(`{"agent":"planner"}`)), client.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != client.StatusCompleted || first.Replayed || first.Err() != nil {
		t.Fatalf("first call = %+v, want completed, not replayed", first)
	}
	if string(first.Data) != `{"a":1}` || first.RequestID != "r1" || first.SessionID != "s1" || first.Tool != "echo" {
		t.Fatalf("first call = %+v (data %s)", first, first.Data)
	}
	if !strings.HasPrefix(first.ExecutionID, "exec_") || first.StartedAt.IsZero() || first.FinishedAt.Before(first.StartedAt) {
		t.Fatalf("first call: execution %q, started %v, finished %v", first.ExecutionID, first.StartedAt, first.FinishedAt)
	}

	// The same identity and fingerprint, spelt differently: a replay.
	again, err := c.Call(ctx, "echo", []byte(`{ "a" : 1.0 }`), client.RequestID("r1"), client.Session("s1"),
		client.Metadata(map[string]any{"agent": "planner"}))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.ExecutionID != first.ExecutionID || string(again.Data) != string(first.Data) ||
		!again.StartedAt.Equal(first.StartedAt) || !again.FinishedAt.Equal(first.FinishedAt) {
		t.Fatalf("replay = %+v, want the first execution %+v replayed", again, first)
	}
	var out struct{ A int }
	if err := again.Decode(&out); err != nil || out.A != 1 {
		t.Fatalf("Decode = %+v, %v", out, err)
	}
	if n := cnt.n.Load(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

func TestCallGeneratesARequestID(t *testing.T) {
	base := startNode(t)
	c, _ := newClient(t, base)
	res, err := c.Call(t.Context(), "create_order", map[string]string{"sku": "KB-01"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.RequestID, client.RequestIDPrefix) || len(res.RequestID) != len(client.RequestIDPrefix)+32 {
		t.Fatalf("generated request_id %q, want %s and 32 hex digits", res.RequestID, client.RequestIDPrefix)
	}
	// It was recorded: the call was idempotent.
	exec, err := c.Lookup(t.Context(), res.RequestID, "")
	if err != nil || exec.ExecutionID != res.ExecutionID {
		t.Fatalf("Lookup(%s) = %+v, %v", res.RequestID, exec, err)
	}
	// Two calls without RequestID are two identities.
	other, err := c.Call(t.Context(), "create_order", map[string]string{"sku": "KB-01"})
	if err != nil || other.RequestID == res.RequestID || other.ExecutionID == res.ExecutionID {
		t.Fatalf("second call = %+v, %v: want a new identity", other, err)
	}
	// NoRequestID: not recorded.
	bare, err := c.Call(t.Context(), "echo", nil, client.NoRequestID())
	if err != nil || bare.RequestID != "" || string(bare.Data) != `{}` {
		t.Fatalf("call without request_id = %+v, %v", bare, err)
	}
	if _, err := c.GetExecution(t.Context(), bare.ExecutionID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GetExecution of an unrecorded call: %v, want ErrNotFound", err)
	}
}

func TestConflictIsNotRetried(t *testing.T) {
	base := startNode(t)
	c, cnt := newClient(t, base, client.WithRetry(fastRetry))
	first, err := c.Call(t.Context(), "echo", map[string]any{"a": 1}, client.RequestID("conflict-1"))
	if err != nil {
		t.Fatal(err)
	}
	before := cnt.n.Load()
	_, err = c.Call(t.Context(), "echo", map[string]any{"a": 2}, client.RequestID("conflict-1"))
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("same request_id, other arguments: %v, want ErrConflict", err)
	}
	ae := asAPIError(t, err)
	if ae.Status != http.StatusConflict || ae.Code != client.CodeConflict || ae.ExecutionID != first.ExecutionID {
		t.Fatalf("APIError = %+v, want 409 naming %s", ae, first.ExecutionID)
	}
	if re := asRequestError(t, err); re.Attempts != 1 || re.RequestID != "conflict-1" || re.Tool != "echo" {
		t.Fatalf("RequestError = %+v, want 1 attempt of echo conflict-1", re)
	}
	if n := cnt.n.Load() - before; n != 1 {
		t.Fatalf("a conflict was sent %d times, want 1", n)
	}
	if errors.Is(err, client.ErrUncertain) || errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a conflict matches other sentinels: %v", err)
	}
}

// A call that meets its own identity running waits for the outcome and
// gets it replayed.
func TestRetryWaitsForARunningExecution(t *testing.T) {
	base := startNode(t)
	observer, _ := newClient(t, base)

	type answer struct {
		status int
		body   map[string]any
		err    error
	}
	direct := make(chan answer, 1)
	go func() {
		resp, err := http.Post(base+"/v1/tools/call", "application/json",
			strings.NewReader(`{"tool":"sleep","arguments":{"ms":1500},"request_id":"slow-1"}`))
		if err != nil {
			direct <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var body map[string]any
		err = json.NewDecoder(resp.Body).Decode(&body)
		direct <- answer{status: resp.StatusCode, body: body, err: err}
	}()
	var running *client.Execution
	testutil.Until(t, 10*time.Second, "the direct call to be running", func() bool {
		e, err := observer.Lookup(t.Context(), "slow-1", "")
		running = e
		return err == nil && e.Status == client.StatusRunning
	})

	c, cnt := newClient(t, base) // the default policy: Retry-After (1 s) is honoured
	start := time.Now()
	res, err := c.Call(t.Context(), "sleep", map[string]any{"ms": 1500}, client.RequestID("slow-1"))
	if err != nil {
		t.Fatalf("Call while the identity runs: %v", err)
	}
	if n := cnt.n.Load(); n < 2 {
		t.Fatalf("%d attempts, want at least 2 (EXECUTION_UNCERTAIN running, then the replay)", n)
	}
	if !res.Replayed || res.ExecutionID != running.ExecutionID || res.Status != client.StatusCompleted ||
		string(res.Data) != `{"slept_ms":1500}` {
		t.Fatalf("Call = %+v (data %s), want the running execution %s replayed", res, res.Data, running.ExecutionID)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("the retry came after %s, before the node's Retry-After of 1 s", waited)
	}
	d := <-direct
	if d.err != nil || d.status != http.StatusOK || d.body["execution_id"] != res.ExecutionID || d.body["replayed"] != false {
		t.Fatalf("the direct call: %d %v %v", d.status, d.body, d.err)
	}
}

func TestToolFailureIsAResult(t *testing.T) {
	base := startNode(t)
	c, cnt := newClient(t, base, client.WithRetry(fastRetry))
	res, err := c.Call(t.Context(), "fail", map[string]string{"message": "boom"}, client.RequestID("f1"))
	if err != nil {
		t.Fatalf("a failed tool is a Result, not an error: %v", err)
	}
	if res.Status != client.StatusFailed || res.Error == nil || res.Error.Code != "TOOL_ERROR" || res.Error.Message != "boom" {
		t.Fatalf("Result = %+v, want failed TOOL_ERROR boom", res)
	}
	rerr := res.Err()
	var te *client.ToolError
	if !errors.As(rerr, &te) || te.Status != client.StatusFailed || te.ExecutionID != res.ExecutionID || te.Tool != "fail" {
		t.Fatalf("Err() = %v (%+v)", rerr, te)
	}
	if err := res.Decode(new(any)); !errors.As(err, &te) {
		t.Fatalf("Decode of a failed result: %v, want the *ToolError", err)
	}
	if n := cnt.n.Load(); n != 1 {
		t.Fatalf("a tool failure was sent %d times, want 1", n)
	}
	// Replayed, not run again.
	again, err := c.Call(t.Context(), "fail", map[string]string{"message": "boom"}, client.RequestID("f1"))
	if err != nil || !again.Replayed || again.ExecutionID != res.ExecutionID || again.Err() == nil {
		t.Fatalf("retry of a failure = %+v, %v", again, err)
	}
}

func TestAuth(t *testing.T) {
	base := "http://" + testutil.Serve(t, newNode(t), api.Config{Auth: api.Auth{Tokens: []api.Token{
		{Principal: "planner", Secret: "right-token", Tools: []string{"echo"}},
	}}})

	for name, opts := range map[string][]client.Option{
		"wrong token": {client.WithToken("wrong-token")},
		"no token":    nil,
	} {
		c, cnt := newClient(t, base, append(opts, client.WithRetry(fastRetry))...)
		_, err := c.Call(t.Context(), "echo", nil, client.RequestID("a1"))
		if !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("%s: %v, want ErrUnauthorized", name, err)
		}
		if ae := asAPIError(t, err); ae.Status != http.StatusUnauthorized {
			t.Fatalf("%s: status %d", name, ae.Status)
		}
		if n := cnt.n.Load(); n != 1 {
			t.Fatalf("%s: sent %d times, want 1", name, n)
		}
	}

	c, _ := newClient(t, base, client.WithToken("right-token"))
	res, err := c.Call(t.Context(), "echo", map[string]int{"x": 1}, client.RequestID("a1"))
	if err != nil || res.Status != client.StatusCompleted {
		t.Fatalf("right token: %+v, %v", res, err)
	}
	exec, err := c.GetExecution(t.Context(), res.ExecutionID)
	if err != nil || exec.Principal != "planner" {
		t.Fatalf("GetExecution = %+v, %v, want principal planner", exec, err)
	}
	_, err = c.Call(t.Context(), "sleep", map[string]int{"ms": 1})
	if !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("a tool outside the allow-list: %v, want ErrForbidden", err)
	}
	tools, err := c.Tools(t.Context())
	if err != nil || len(tools) != 1 || tools[0].Name != "echo" {
		t.Fatalf("Tools = %+v, %v, want only echo", tools, err)
	}
}

func TestServerSideRefusals(t *testing.T) {
	base := startNode(t)
	c, cnt := newClient(t, base, client.WithRetry(fastRetry))

	_, err := c.Call(t.Context(), "no_such_tool", nil)
	if !errors.Is(err, client.ErrUnknownTool) || errors.Is(err, client.ErrNotFound) {
		t.Fatalf("unknown tool: %v, want ErrUnknownTool only", err)
	}
	if n := cnt.n.Load(); n != 1 {
		t.Fatalf("an unknown tool was sent %d times, want 1", n)
	}

	_, err = c.Call(t.Context(), "create_order", map[string]any{"sku": 7}, client.RequestID("bad-args"))
	if !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("arguments against the schema: %v, want ErrInvalid", err)
	}
	if n := cnt.n.Load(); n != 2 {
		t.Fatalf("an invalid call was sent %d times in all, want 1", n-1)
	}
}

func TestCallRefusesBadInputLocally(t *testing.T) {
	c, cnt := newClient(t, "http://127.0.0.1:1") // never reached
	for name, call := range map[string]func() error{
		"array arguments": func() error { _, err := c.Call(t.Context(), "echo", []int{1}); return err },
		"string arguments": func() error {
			_, err := c.Call(t.Context(), "echo", json.RawMessage(`"x"`))
			return err
		},
		"invalid JSON":      func() error { _, err := c.Call(t.Context(), "echo", []byte(`{`)); return err },
		"array metadata":    func() error { _, err := c.Call(t.Context(), "echo", nil, client.Metadata([]int{})); return err },
		"empty request_id":  func() error { _, err := c.Call(t.Context(), "echo", nil, client.RequestID("")); return err },
		"spaced request_id": func() error { _, err := c.Call(t.Context(), "echo", nil, client.RequestID("a b")); return err },
		"long session": func() error {
			_, err := c.Call(t.Context(), "echo", nil, client.Session(strings.Repeat("s", 256)))
			return err
		},
		"zero timeout": func() error { _, err := c.Call(t.Context(), "echo", nil, client.Timeout(0)); return err },
		"no tool":      func() error { _, err := c.Call(t.Context(), "", nil); return err },
		"both id options": func() error {
			_, err := c.Call(t.Context(), "echo", nil, client.RequestID("x"), client.NoRequestID())
			return err
		},
		"negative retry": func() error {
			_, err := c.Call(t.Context(), "echo", nil, client.Retry(client.RetryPolicy{MaxAttempts: -1}))
			return err
		},
		"failed without code": func() error { _, err := c.Resolve(t.Context(), "exec_x", client.Failed("", "m")); return err },
		"empty execution id":  func() error { _, err := c.GetExecution(t.Context(), ""); return err },
		"empty lookup":        func() error { _, err := c.Lookup(t.Context(), "", ""); return err },
	} {
		if err := call(); !errors.Is(err, client.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if n := cnt.n.Load(); n != 0 {
		t.Fatalf("%d requests sent for refused input, want 0", n)
	}
}

func TestNewChecksTheBaseURL(t *testing.T) {
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://h", "http://", "http://u:p@h", "http://h/?q=1", "http://h/#f", "://x"} {
		if _, err := client.New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	if _, err := client.New("http://h", client.WithRetry(client.RetryPolicy{BaseDelay: time.Second, MaxDelay: time.Millisecond})); err == nil {
		t.Error("New accepted BaseDelay above MaxDelay")
	}
	if _, err := client.New("http://h", client.WithToken("a\nb")); err == nil {
		t.Error("New accepted a token with a line break")
	}
	for in, want := range map[string]string{
		"http://127.0.0.1:8080/":     "http://127.0.0.1:8080",
		"https://gw.example/carmy//": "https://gw.example/carmy",
	} {
		c, err := client.New(in)
		if err != nil {
			t.Errorf("New(%q): %v", in, err)
		} else if c.BaseURL() != want {
			t.Errorf("New(%q).BaseURL() = %s, want %s", in, c.BaseURL(), want)
		}
	}
}
