package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/tests/pgtest"
	"github.com/carmyhq/carmy/tests/testutil"
)

// The black-box tests of --store postgres (docs/operations.md#a-fleet-on-postgresql) start their own
// PostgreSQL server (Debian's binaries, in a temporary directory, on a
// Unix socket) and real carmy processes on 127.0.0.1 that share it.

// needPostgres starts a PostgreSQL server for t (testutil.NeedPostgres), unless
// the test is short.
func needPostgres(t *testing.T) *pgtest.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the carmy binary and PostgreSQL")
	}
	return testutil.NeedPostgres(t)
}

// startFleetNode starts a --dev node named id on storeURL.
func startFleetNode(t *testing.T, bin, id, storeURL string, args ...string) *testutil.Node {
	t.Helper()
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{}, append([]string{"--dev", "--node-id", id, "--store", storeURL}, args...)...)
	n.WaitReady(t, 60*time.Second)
	return n
}

// pgCall is an answer of POST /v1/tools/call, or its error envelope.
type pgCall struct {
	status int
	body   string

	ExecutionID string          `json:"execution_id"`
	Status      string          `json:"status"`
	Data        json.RawMessage `json:"data"`
	Replayed    bool            `json:"replayed"`
	Resolved    bool            `json:"resolved"`
	Error       struct {
		Code   string `json:"code"`
		Status string `json:"status"`
	} `json:"error"`
}

var pgClient = &http.Client{Timeout: 60 * time.Second}

// call posts a call of tool with args under requestID ("" for none).
func call(t testing.TB, n *testutil.Node, tool, args, requestID string) pgCall {
	t.Helper()
	c, err := tryCall(n, tool, args, requestID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tryCall(n *testutil.Node, tool, args, requestID string) (pgCall, error) {
	body := fmt.Sprintf(`{"tool":%q,"arguments":%s`, tool, args)
	if requestID != "" {
		body += fmt.Sprintf(`,"request_id":%q`, requestID)
	}
	body += "}"
	resp, err := pgClient.Post(n.URL+"/v1/tools/call", "application/json", strings.NewReader(body))
	if err != nil {
		return pgCall{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return pgCall{}, err
	}
	c := pgCall{status: resp.StatusCode, body: string(b)}
	if err := json.Unmarshal(b, &c); err != nil {
		return pgCall{}, fmt.Errorf("answer %d %q: %w", resp.StatusCode, b, err)
	}
	return c, nil
}

// do sends a request with a JSON body (or none) and returns the status
// and body.
func do(t testing.TB, method, url, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := pgClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// execution reads GET /v1/executions/{id}.
func execution(t testing.TB, n *testutil.Node, id string) *client.Execution {
	t.Helper()
	e, err := apiClient(t, n.URL, "").GetExecution(t.Context(), id)
	if err != nil {
		t.Fatalf("GET /v1/executions/%s: %v", id, err)
	}
	return e
}

// runningID looks requestID up on n and returns its execution when it is
// running, else an error (to poll).
func runningID(t testing.TB, n *testutil.Node, requestID string) (string, error) {
	t.Helper()
	e, err := apiClient(t, n.URL, "").Lookup(t.Context(), requestID, "")
	switch {
	case err != nil:
		return "", err
	case e.Status != client.StatusRunning:
		return "", fmt.Errorf("status %s", e.Status)
	}
	return e.ExecutionID, nil
}

// getFleetStatus reads GET /v1/cluster of a fleet node.
func getFleetStatus(t testing.TB, n *testutil.Node) *client.ClusterStatus {
	t.Helper()
	st, err := apiClient(t, n.URL, "").ClusterStatus(t.Context())
	if err != nil {
		t.Fatalf("GET /v1/cluster: %v", err)
	}
	return st
}

// heartbeatOf returns what st says of node id's heartbeat ("" when it is
// not listed).
func heartbeatOf(st *client.ClusterStatus, id string) string {
	for _, n := range st.Nodes {
		if n.ID == id {
			return n.Heartbeat
		}
	}
	return ""
}

// asyncCall runs call in a goroutine; the answer arrives on the channel.
func asyncCall(n *testutil.Node, tool, args, requestID string) <-chan pgCall {
	ch := make(chan pgCall, 1)
	go func() {
		c, err := tryCall(n, tool, args, requestID)
		if err != nil {
			c = pgCall{status: -1, body: err.Error()}
		}
		ch <- c
	}()
	return ch
}
