package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestMCPBurstOnBusyHost is the overload of docs/operations.md#overload through MCP: concurrent
// tools/call of 900 KiB (with _meta carmy/request_id) on one follower of a
// 3-node cluster, while three processes spin on the CPU beside the nodes.
// Every call is answered with its result or refused before anything was
// reserved (isError, UNAVAILABLE, "tool_ran": false; retried for a while),
// none is answered "the tool ran but its outcome is not recorded", no
// election is held, and every completed call replays over HTTP through the
// leader with its execution. CARMY_BURST_RUNS=N runs it N times.
func TestMCPBurstOnBusyHost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the carmy binary and runs a cluster of three processes")
	}
	testutil.NeedBusyHost(t)
	bin := testutil.BuildCarmy(t)
	for run := range testutil.Runs(t, "CARMY_BURST_RUNS") {
		t.Run(fmt.Sprintf("run%d", run+1), func(t *testing.T) { mcpBurstOnBusyHost(t, bin, 80, 900<<10) })
	}
}

func mcpBurstOnBusyHost(t *testing.T, bin string, calls, size int) {
	c := testutil.StartCluster(t, bin, 3, testutil.StartOptions{}, "--dev")
	leader := c.Leader(t, 30*time.Second)
	follower := c.Followers(leader)[0]
	elections := testutil.WatchElections(t, c.Nodes())
	testutil.BusyHost(t, 3, 3*time.Minute)

	// A few sessions, each carrying calls concurrently.
	const sessions = 4
	var css [sessions]*sdk.ClientSession
	for i := range css {
		cl := sdk.NewClient(&sdk.Implementation{Name: "carmy-overload-test", Version: "v1"}, nil)
		tr := &sdk.StreamableClientTransport{Endpoint: follower.URL + "/mcp", HTTPClient: &http.Client{Timeout: 90 * time.Second}, DisableStandaloneSSE: true}
		cs, err := cl.Connect(t.Context(), tr, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { cs.Close() })
		css[i] = cs
	}
	arg := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), size) }
	type result struct {
		res     *sdk.CallToolResult
		err     error
		refused int
	}
	results := make([]result, calls)
	deadline := time.Now().Add(40 * time.Second)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			<-start
			r := &results[i]
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				r.res, r.err = css[i%sessions].CallTool(ctx, &sdk.CallToolParams{Name: "echo",
					Arguments: map[string]any{"i": i, "s": arg(i)}, Meta: sdk.Meta{"carmy/request_id": fmt.Sprintf("mcp-busy-%d", i)}})
				cancel()
				if r.err != nil || !mcpRefusedUnreserved(r.res) || time.Now().After(deadline) {
					return
				}
				r.refused++
				time.Sleep(time.Second)
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)

	completed, refused, failed := 0, 0, 0
	for i, r := range results {
		refused += r.refused
		switch {
		case r.err == nil && !r.res.IsError && r.res.Meta["carmy/status"] == "completed":
			completed++
			continue
		case r.err == nil && mcpRefusedUnreserved(r.res):
			continue
		}
		if failed++; failed <= 5 {
			var body []byte
			if r.res != nil {
				body, _ = json.Marshal(r.res.StructuredContent)
			}
			t.Errorf("call %d: %v %.400s", i, r.err, body)
		}
	}
	t.Logf("%d MCP calls of %d KiB on %s beside 3 busy processes: settled in %s; %d completed, %d refusals before reserving (retried), %d failed; load average %s",
		calls, size>>10, follower.ID(), took.Round(time.Millisecond), completed, refused, failed, testutil.LoadAvg())
	elections.RequireNone(t)
	if failed > 0 {
		t.Fatalf("%d of %d calls were answered neither completed nor refused before reserving", failed, calls)
	}
	if completed == 0 {
		t.Fatal("no call completed")
	}
	hc := &http.Client{Timeout: 60 * time.Second}
	for i, r := range results {
		if r.res == nil || r.res.IsError {
			continue
		}
		body := fmt.Sprintf(`{"tool":"echo","request_id":"mcp-busy-%d","arguments":{"i":%d,"s":%q}}`, i, i, arg(i))
		resp, err := hc.Post(leader.URL+"/v1/tools/call", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("replay %d: %v", i, err)
		}
		var got map[string]any
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || got["replayed"] != true || got["execution_id"] != r.res.Meta["carmy/execution_id"] {
			t.Fatalf("replay %d: %d %v %v, want a replay of %v", i, resp.StatusCode, err, got["execution_id"], r.res.Meta["carmy/execution_id"])
		}
	}
}

// mcpRefusedUnreserved reports whether res refuses a call before anything
// was reserved: UNAVAILABLE naming a bound of the node, "tool_ran": false.
func mcpRefusedUnreserved(res *sdk.CallToolResult) bool {
	if res == nil || !res.IsError {
		return false
	}
	var env struct {
		Error struct {
			Code     string `json:"code"`
			Resource string `json:"resource"`
			ToolRan  *bool  `json:"tool_ran"`
		} `json:"error"`
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil || json.Unmarshal(raw, &env) != nil {
		return false
	}
	e := env.Error
	return e.Code == "UNAVAILABLE" && (e.Resource == "running" || e.Resource == "inflight_bytes") && e.ToolRan != nil && !*e.ToolRan
}
