package cluster_test

// Process-level tests (DESIGN tier (d)): real `carmy serve` processes on
// loopback, each with its own data dir and kernel-chosen ports, driven over
// HTTP as a client would: calls on every node, kill -9 of the leader under
// load, restart from the data dir, interruption of a dead node's
// executions and their reconciliation, join and removal through the admin
// API, and SIGTERM of the leader. Every wait polls a condition with a
// deadline. A failing test logs every node's output and view of the cluster.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// procWait bounds waits for elections, readiness and membership changes.
const procWait = 30 * time.Second

func procSkipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the carmy binary and runs clusters of processes")
	}
}

// procStep runs one step of a scenario as a subtest; a failed step ends
// the scenario, since the next ones build on it.
func procStep(t *testing.T, name string, fn func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, fn) {
		t.FailNow()
	}
}

// procAnswer is one HTTP answer; body is nil when it is not a JSON object.
type procAnswer struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (a procAnswer) String() string { return fmt.Sprintf("%d %s", a.status, a.raw) }

// get returns the value at path in the body (nil when absent).
func (a procAnswer) get(path ...string) any {
	var v any = a.body
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

func (a procAnswer) str(path ...string) string {
	s, _ := a.get(path...).(string)
	return s
}

func (a procAnswer) is(value any, path ...string) bool { return a.get(path...) == value }

// uncertain reports whether a is 409 EXECUTION_UNCERTAIN with that status.
func (a procAnswer) uncertain(status string) bool {
	return a.status == http.StatusConflict && a.str("error", "code") == "EXECUTION_UNCERTAIN" && a.str("error", "status") == status
}

var procClient = &http.Client{Timeout: 20 * time.Second}

// procSend sends one request. Its error is a network error; an answer that
// is not a JSON object has a nil body.
func procSend(client *http.Client, method, url, body string) (procAnswer, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return procAnswer{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return procAnswer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return procAnswer{}, err
	}
	a := procAnswer{status: resp.StatusCode, header: resp.Header, raw: raw}
	if json.Unmarshal(raw, &a.body) != nil {
		a.body = nil
	}
	return a, nil
}

// procDo sends one request and fails the test on a network error or an
// answer that is not a JSON object.
func procDo(t testing.TB, method, url, body string) procAnswer {
	t.Helper()
	a, err := procSend(procClient, method, url, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	if a.body == nil {
		t.Fatalf("%s %s: the answer is not a JSON object: %s", method, url, a)
	}
	return a
}

func procCall(t testing.TB, n *testutil.Node, body string) procAnswer {
	t.Helper()
	return procDo(t, http.MethodPost, n.URL+"/v1/tools/call", body)
}

// procWantRun checks that a is a first run (not a replay) with status.
func procWantRun(t testing.TB, what string, a procAnswer, status string) string {
	t.Helper()
	if a.status != http.StatusOK || a.str("status") != status || !a.is(false, "replayed") ||
		!strings.HasPrefix(a.str("execution_id"), "exec_") || a.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("%s: got %s, want a first run with status %s", what, a, status)
	}
	return a.str("execution_id")
}

// procWantReplay checks that a replays the execution execID.
func procWantReplay(t testing.TB, what string, a procAnswer, execID string) {
	t.Helper()
	if a.status != http.StatusOK || !a.is(true, "replayed") || a.header.Get("Idempotent-Replayed") != "true" ||
		a.str("execution_id") != execID {
		t.Fatalf("%s: got %s, want a replay of %s", what, a, execID)
	}
}

// procWriteConfig writes a config file (docs/config.md) with the demo tools
// and, when upstream is not "", the HTTP tool "upstream" calling it.
func procWriteConfig(t *testing.T, upstream string) string {
	t.Helper()
	cfg := "demo_tools: true\n"
	if upstream != "" {
		cfg += fmt.Sprintf("tools:\n  - name: upstream\n    description: an external HTTP tool\n    timeout: 10s\n    http:\n      url: %s/call\n", upstream)
	}
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProcessClusterAdmin: a 3-node cluster serves calls on every node and
// replays them through the others; a fourth node joins through the admin
// API, serves, and is removed; SIGTERM of the leader exits cleanly and
// another node leads.
func TestProcessClusterAdmin(t *testing.T) {
	procSkipShort(t)
	bin := testutil.BuildCarmy(t)
	c := testutil.StartCluster(t, bin, 3, testutil.StartOptions{}, "--dev", "--fast-failover")
	procStep(t, "calls to every node", func(t *testing.T) { procCallsToEveryNode(t, c) })
	procStep(t, "cancel through another node", func(t *testing.T) { procCancelElsewhere(t, c) })
	procStep(t, "join and removal of a fourth node", func(t *testing.T) { procJoinAndRemove(t, c) })
	procStep(t, "SIGTERM of the leader", func(t *testing.T) { procStopLeader(t, c) })
}

func procCallsToEveryNode(t *testing.T, c *testutil.Cluster) {
	nodes := c.Running()
	if len(nodes) != 3 {
		t.Fatalf("%d nodes run, want 3", len(nodes))
	}
	leader := c.Leader(t, procWait)
	for _, n := range nodes {
		if err := n.Ready(); err != nil {
			t.Fatal(err)
		}
		st, err := n.ClusterStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Voters(); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
			t.Fatalf("%s lists voters %v", n.ID(), got)
		}
		for _, m := range st.Nodes {
			if m.Gossip != "alive" || m.HTTPAddr != c.Node(m.ID).Addr || m.RaftAddr != c.Node(m.ID).RaftAddr() {
				t.Fatalf("%s lists %+v; the node is at %s, raft %s", n.ID(), m, c.Node(m.ID).Addr, c.Node(m.ID).RaftAddr())
			}
		}
		if st.Leader == nil || st.Leader.ID != leader.ID() || st.Leader.HTTPAddr != leader.Addr {
			t.Fatalf("%s names leader %+v, want %s at %s", n.ID(), st.Leader, leader.ID(), leader.Addr)
		}
	}
	for i, n := range nodes {
		body := fmt.Sprintf(`{"tool":"create_order","arguments":{"sku":"KB-%d"},"request_id":"order-on-%s"}`, i, n.ID())
		a := procCall(t, n, body)
		id := procWantRun(t, "a call on "+n.ID(), a, "completed")
		other := nodes[(i+1)%len(nodes)]
		b := procCall(t, other, body)
		procWantReplay(t, "its replay through "+other.ID(), b, id)
		if want := strings.Replace(string(a.raw), `"replayed":false`, `"replayed":true`, 1); string(b.raw) != want {
			t.Fatalf("the replay through %s differs from the recorded answer:\n got %s\nwant %s", other.ID(), b.raw, want)
		}
		third := nodes[(i+2)%len(nodes)]
		r := procDo(t, http.MethodGet, third.URL+"/v1/executions/"+id, "")
		if r.status != http.StatusOK || r.str("node_id") != n.ID() || r.str("status") != "completed" {
			t.Fatalf("GET /v1/executions/%s on %s: %s, want completed by %s", id, third.ID(), r, n.ID())
		}
	}
}

// procCancelElsewhere cancels, through one node, a call running on
// another: cancelled is recorded at once, the runner's tool stops (its
// caller gets the cancelled record long before the tool's 60 s), and a
// retry on a third node replays it.
func procCancelElsewhere(t *testing.T, c *testutil.Cluster) {
	nodes := c.Running()
	runner, canceller, third := nodes[0], nodes[1], nodes[2]
	body := `{"tool":"sleep","arguments":{"ms":60000},"request_id":"cancel-elsewhere"}`
	answer := make(chan procAnswer, 1)
	go func() {
		a, err := procSend(http.DefaultClient, http.MethodPost, runner.URL+"/v1/tools/call", body)
		if err != nil {
			a = procAnswer{status: -1, raw: []byte(err.Error())}
		}
		answer <- a
	}()
	var id string
	testutil.WaitFor(t, procWait, "the call to run on "+runner.ID(), func() error {
		a := procDo(t, http.MethodGet, canceller.URL+"/v1/executions?request_id=cancel-elsewhere", "")
		if a.status != http.StatusOK || a.str("status") != "running" {
			return fmt.Errorf("lookup: %s", a)
		}
		id = a.str("execution_id")
		return nil
	})
	cancelled := procDo(t, http.MethodPost, canceller.URL+"/v1/executions/"+id+"/cancel", "")
	if cancelled.status != http.StatusOK || cancelled.str("status") != "cancelled" {
		t.Fatalf("cancel through %s: %s", canceller.ID(), cancelled)
	}
	select {
	case a := <-answer:
		if a.status != http.StatusOK || a.str("status") != "cancelled" || a.str("execution_id") != id {
			t.Fatalf("the runner's caller got %s, want the cancelled record", a)
		}
	case <-time.After(procWait):
		t.Fatalf("the tool on %s did not stop after the cancel through %s", runner.ID(), canceller.ID())
	}
	r := procCall(t, third, body)
	procWantReplay(t, "a retry on "+third.ID(), r, id)
	if r.str("status") != "cancelled" {
		t.Fatalf("the retry replays %s, want cancelled", r)
	}
}

func procJoinAndRemove(t *testing.T, c *testutil.Cluster) {
	leader := c.Leader(t, procWait)
	follower := c.Followers(leader)[0]

	// A node with neither --bootstrap nor --join waits to be added.
	n4 := c.Add(t, "n4", "--fast-failover", "--config", procWriteConfig(t, ""))
	// The node writes its log in batches (at most 50 ms late): poll.
	testutil.WaitUntil(t, 10*time.Second, "n4 to log its raft address and that it waits to be added", func() bool {
		return n4.RaftAddr() != "" && strings.Contains(n4.Logs(), "waiting to be added")
	})
	raftAddr := n4.RaftAddr()
	if err := n4.Ready(); err == nil {
		t.Fatal("n4 is ready before it was added")
	}

	spec := fmt.Sprintf(`{"id":"n4","raft_addr":%q,"http_addr":%q}`, raftAddr, n4.Addr)
	a := procDo(t, http.MethodPost, follower.URL+"/v1/cluster/nodes", spec)
	if a.status != http.StatusOK || !strings.Contains(string(a.raw), `"id":"n4"`) {
		t.Fatalf("POST /v1/cluster/nodes on %s: %s", follower.ID(), a)
	}
	n4.WaitReady(t, procWait)
	c.WaitFormed(t, 4, procWait)
	c.WaitStatus(t, procWait, "n4 listed at its addresses", func(_ *testutil.Node, st testutil.ClusterStatus) error {
		if m, ok := st.Member("n4"); !ok || m.RaftAddr != raftAddr || m.HTTPAddr != n4.Addr {
			return fmt.Errorf("n4 listed as %+v", m)
		}
		return nil
	})

	body := `{"tool":"create_order","arguments":{"sku":"N4"},"request_id":"order-on-n4"}`
	first := procCall(t, n4, body)
	id := procWantRun(t, "a call on n4", first, "completed")
	replay := procCall(t, c.Node("n1"), body)
	procWantReplay(t, "its replay through n1", replay, id)
	if want := strings.Replace(string(first.raw), `"replayed":false`, `"replayed":true`, 1); string(replay.raw) != want {
		t.Fatalf("the replay through n1 differs from the recorded answer:\n got %s\nwant %s", replay.raw, want)
	}

	// The same join again is a no-op.
	again := procDo(t, http.MethodPost, follower.URL+"/v1/cluster/nodes", spec)
	if again.status != http.StatusOK {
		t.Fatalf("the same POST /v1/cluster/nodes again: %s", again)
	}
	c.WaitFormed(t, 4, procWait)

	remover := c.Node("n2")
	d := procDo(t, http.MethodDelete, remover.URL+"/v1/cluster/nodes/n4", "")
	if d.status != http.StatusOK {
		t.Fatalf("DELETE /v1/cluster/nodes/n4 on n2: %s", d)
	}
	if strings.Contains(string(d.raw), `"id":"n4"`) {
		t.Errorf("the answer to DELETE /v1/cluster/nodes/n4 on n2 still lists n4: %s", d)
	}
	c.Discard("n4")
	c.WaitStatus(t, procWait, "n4 no longer listed", func(_ *testutil.Node, st testutil.ClusterStatus) error {
		if _, ok := st.Member("n4"); ok {
			return fmt.Errorf("n4 is still listed: %+v", st.Nodes)
		}
		if got := st.Voters(); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
			return fmt.Errorf("voters %v", got)
		}
		return nil
	})
	for _, n := range c.Running() {
		body := fmt.Sprintf(`{"tool":"create_order","arguments":{"sku":"AFTER"},"request_id":"after-removal-on-%s"}`, n.ID())
		procWantRun(t, "a call on "+n.ID()+" after the removal", procCall(t, n, body), "completed")
	}
}

func procStopLeader(t *testing.T, c *testutil.Cluster) {
	leader := c.Leader(t, procWait)
	start := time.Now()
	if err := leader.Stop(15 * time.Second); err != nil {
		t.Fatalf("SIGTERM of the leader %s: %v", leader.ID(), err)
	}
	t.Logf("the leader %s exited 0 %s after SIGTERM", leader.ID(), time.Since(start).Round(time.Millisecond))
	if !strings.Contains(leader.Logs(), "handed leadership over") {
		t.Errorf("the leader %s did not log that it handed leadership over", leader.ID())
	}
	next := c.Leader(t, procWait)
	if next.ID() == leader.ID() {
		t.Fatalf("%s still leads after it stopped", next.ID())
	}
	// The stopped node stays in the configuration.
	st, err := next.ClusterStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := st.Member(leader.ID()); !ok || m.Suffrage != "voter" {
		t.Fatalf("the stopped node %s is no longer a voter: %+v", leader.ID(), st.Nodes)
	}
	for _, n := range c.Running() {
		body := fmt.Sprintf(`{"tool":"create_order","arguments":{"sku":"AFTER"},"request_id":"after-stop-on-%s"}`, n.ID())
		procWantRun(t, "a call on "+n.ID()+" after the stop", procCall(t, n, body), "completed")
	}
}

// TestProcessCrashRecovery: kill -9 of the leader while clients call an
// external HTTP tool through every node, restart of the killed node from
// its data dir, and a running call on a killed follower, which becomes
// interrupted and is reconciled.
func TestProcessCrashRecovery(t *testing.T) {
	procSkipShort(t)
	testutil.LongTier(t, "kill -9 of the leader under load")
	bin := testutil.BuildCarmy(t)
	up := procStartUpstream(t)
	c := testutil.StartCluster(t, bin, 3, testutil.StartOptions{}, "--dev", "--fast-failover", "--config", procWriteConfig(t, up.URL))

	var (
		killed     *testutil.Node
		whileDown  []procResult // answered 200 completed while killed was down
		unsettled  []procResult // given up by their clients
		replayable []procResult
	)
	procStep(t, "kill -9 of the leader while calls run", func(t *testing.T) {
		killed, whileDown, unsettled = procKillLeaderUnderLoad(t, c, up)
	})
	procStep(t, "restart of the killed node", func(t *testing.T) {
		// More calls while it is down, on the survivors.
		survivors := c.Running()
		for i := range 4 {
			body := fmt.Sprintf(`{"tool":"create_order","arguments":{"sku":"DOWN"},"request_id":"while-down-%d"}`, i)
			a := procCall(t, survivors[i%len(survivors)], body)
			procWantRun(t, "a call while "+killed.ID()+" is down", a, "completed")
			replayable = append(replayable, procResult{requestID: fmt.Sprintf("while-down-%d", i), body: body, answer: a})
		}
		replayable = append(replayable, whileDown...)

		// No --join: it rejoins from its data dir alone.
		n := c.Restart(t, killed.ID(), testutil.WithoutFlag(killed.Args(), "--join")...)
		n.WaitReady(t, procWait)
		// The node writes its log in batches (at most 50 ms late): poll.
		testutil.WaitUntil(t, 10*time.Second, "the restarted "+n.ID()+" to say it found its state", func() bool {
			return strings.Contains(n.Logs(), "existing_state=true")
		})
		c.WaitStatus(t, procWait, killed.ID()+" a voter and gossip-alive again", func(_ *testutil.Node, st testutil.ClusterStatus) error {
			m, ok := st.Member(killed.ID())
			switch {
			case !ok || m.Suffrage != "voter" || m.Gossip != "alive":
				return fmt.Errorf("%s listed as %+v", killed.ID(), m)
			case len(st.Voters()) != 3 || st.Leader == nil:
				return fmt.Errorf("voters %v, leader %v", st.Voters(), st.Leader)
			}
			return nil
		})
		for _, r := range replayable {
			procWantReplay(t, r.requestID+" replayed by the restarted "+n.ID(), procCall(t, n, r.body), r.answer.str("execution_id"))
		}
		t.Logf("the restarted %s replayed %d calls made while it was down", n.ID(), len(replayable))

		// The calls left running on the killed node were marked interrupted
		// before it served again; the others run now, for the first time.
		for _, r := range unsettled {
			a := procCall(t, n, r.body)
			up.mu.Lock()
			reached := up.byReq[r.requestID]
			up.mu.Unlock()
			switch {
			case a.uncertain("interrupted"):
			case a.status == http.StatusOK && a.str("status") == "completed" && reached == 1:
			default:
				t.Errorf("a retry of %s, given up during the kill, on the restarted %s: %s (the upstream saw it %d times)", r.requestID, n.ID(), a, reached)
			}
		}
		up.mu.Lock()
		defer up.mu.Unlock()
		for req, count := range up.byReq {
			if count > 1 {
				t.Errorf("request_id %s reached the upstream %d times", req, count)
			}
		}
	})
	procStep(t, "a running call on a killed follower", func(t *testing.T) { procInterruptedAndResolved(t, c) })
}

// procUpstream is an external HTTP tool: it counts requests per execution
// and per request_id, records fencing tokens, and answers {"ok":true}
// after 20 ms.
type procUpstream struct {
	*httptest.Server
	mu       sync.Mutex
	byExec   map[string]int
	byReq    map[string]int
	execOf   map[string]string // request_id → the execution that reached here first
	token    map[string]uint64 // execution_id → Carmy-Fencing-Token
	bad      []string          // requests without the headers of docs/config.md#http-tools
	inFlight atomic.Int64
}

func procStartUpstream(t *testing.T) *procUpstream {
	up := &procUpstream{
		byExec: make(map[string]int), byReq: make(map[string]int),
		execOf: make(map[string]string), token: make(map[string]uint64),
	}
	up.Server = httptest.NewServer(http.HandlerFunc(up.serve))
	t.Cleanup(up.Close)
	return up
}

func (up *procUpstream) serve(w http.ResponseWriter, r *http.Request) {
	up.inFlight.Add(1)
	defer up.inFlight.Add(-1)
	exec, req := r.Header.Get("Carmy-Execution-Id"), r.Header.Get("Carmy-Request-Id")
	tok, err := strconv.ParseUint(r.Header.Get("Carmy-Fencing-Token"), 10, 64)
	up.mu.Lock()
	up.byExec[exec]++
	up.byReq[req]++
	if _, seen := up.execOf[req]; !seen {
		up.execOf[req] = exec
	}
	if exec == "" || req == "" || err != nil || tok == 0 || r.Header.Get("Idempotency-Key") == "" {
		up.bad = append(up.bad, fmt.Sprintf("%s %v", r.URL, r.Header))
	} else {
		up.token[exec] = tok
	}
	up.mu.Unlock()
	select {
	case <-time.After(20 * time.Millisecond):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

// procResult is what one client got for one request_id, after retries.
type procResult struct {
	worker, seq int
	requestID   string
	body        string
	first       time.Time // the first try
	tries       int
	answer      procAnswer // the last answer (status 0 after a network error)
	err         error      // the last try's network error
}

func (r procResult) completed() bool {
	return r.err == nil && r.answer.status == http.StatusOK && r.answer.str("status") == "completed"
}

// procLoad runs clients that call random nodes with fresh request_ids and
// retry each one (same body) on network errors, 503 and 409
// EXECUTION_UNCERTAIN (running), with short backoff, until an answer, 60
// tries or 5 s.
type procLoad struct {
	nodes  []*testutil.Node
	client *http.Client
	stop   chan struct{}
	halted sync.Once
	wg     sync.WaitGroup

	mu      sync.Mutex
	results []procResult
}

func procStartLoad(nodes []*testutil.Node, workers int) *procLoad {
	l := &procLoad{
		nodes:  nodes,
		client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}},
		stop:   make(chan struct{}),
	}
	for w := range workers {
		l.wg.Add(1)
		go l.worker(w)
	}
	return l
}

// halt stops the clients once their current request_id is settled, and
// waits for them.
func (l *procLoad) halt() {
	l.halted.Do(func() { close(l.stop) })
	l.wg.Wait()
}

func (l *procLoad) worker(w int) {
	defer l.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	for seq := 0; ; seq++ {
		select {
		case <-l.stop:
			return
		default:
		}
		id := fmt.Sprintf("load-%d-%d", w, seq)
		r := procResult{
			worker: w, seq: seq, requestID: id, first: time.Now(),
			body: fmt.Sprintf(`{"tool":"upstream","arguments":{"worker":%d,"seq":%d},"request_id":%q}`, w, seq, id),
		}
		backoff := 20 * time.Millisecond
		for r.tries < 60 {
			r.tries++
			n := l.nodes[rng.IntN(len(l.nodes))]
			r.answer, r.err = procSend(l.client, http.MethodPost, n.URL+"/v1/tools/call", r.body)
			retry := r.err != nil || r.answer.status == http.StatusServiceUnavailable || r.answer.uncertain("running")
			if !retry || time.Since(r.first) > 5*time.Second {
				break
			}
			time.Sleep(backoff) // backoff between retries, not a wait for a condition
			backoff = min(2*backoff, 200*time.Millisecond)
		}
		l.mu.Lock()
		l.results = append(l.results, r)
		l.mu.Unlock()
	}
}

// completedSince counts request_ids first tried at or after since that got
// a 200 completed answer.
func (l *procLoad) completedSince(since time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.results {
		if r.completed() && !r.first.Before(since) {
			n++
		}
	}
	return n
}

// procKillLeaderUnderLoad kills the leader with SIGKILL while clients
// call the upstream tool through every node, and checks at-most-once
// delivery to the upstream, fencing tokens and replays. It returns the
// killed node, the calls answered completed that were first tried after
// the kill, and the calls whose clients gave up (uncertain or unavailable).
func procKillLeaderUnderLoad(t *testing.T, c *testutil.Cluster, up *procUpstream) (killed *testutil.Node, afterKill, unsettled []procResult) {
	leader := c.Leader(t, procWait)
	l := procStartLoad(c.Running(), 6)
	defer l.halt()
	testutil.WaitFor(t, procWait, "30 calls completed and calls in flight at the upstream", func() error {
		if n := l.completedSince(time.Time{}); n < 30 || up.inFlight.Load() == 0 {
			return fmt.Errorf("%d completed, %d in flight", n, up.inFlight.Load())
		}
		return nil
	})
	inFlight := up.inFlight.Load()
	killedAt := time.Now()
	leader.Kill()
	t.Logf("killed the leader %s with %d calls in flight at the upstream", leader.ID(), inFlight)
	testutil.WaitFor(t, procWait, "30 calls first tried after the kill completed", func() error {
		if n := l.completedSince(killedAt); n < 30 {
			return fmt.Errorf("%d completed", n)
		}
		return nil
	})
	l.halt()
	next := c.Leader(t, procWait)
	t.Logf("%s leads after the kill", next.ID())

	up.mu.Lock()
	byExec, byReq, execOf, token := maps.Clone(up.byExec), maps.Clone(up.byReq), maps.Clone(up.execOf), maps.Clone(up.token)
	bad := slices.Clone(up.bad)
	up.mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("%d upstream requests lack Carmy headers, e.g. %s", len(bad), bad[0])
	}
	for req, n := range byReq {
		if n > 1 {
			t.Errorf("request_id %s reached the upstream %d times", req, n)
		}
	}
	for exec, n := range byExec {
		if n > 1 {
			t.Errorf("execution %s reached the upstream %d times", exec, n)
		}
	}
	seenTokens := make(map[uint64]string)
	for exec, tok := range token {
		if other, dup := seenTokens[tok]; dup {
			t.Errorf("executions %s and %s carry the same fencing token %d", exec, other, tok)
		}
		seenTokens[tok] = exec
	}

	var completed, uncertain, gaveUp []procResult
	for _, r := range l.results {
		a := r.answer
		switch {
		case r.completed():
			exec := a.str("execution_id")
			if byExec[exec] != 1 || execOf[r.requestID] != exec {
				t.Errorf("%s answered 200 with execution %s, which the upstream saw %d times (it saw %q for this request_id)",
					r.requestID, exec, byExec[exec], execOf[r.requestID])
			}
			if !a.is(true, "data", "ok") {
				t.Errorf("%s answered %s, want the upstream's data", r.requestID, a)
			}
			completed = append(completed, r)
			if !r.first.Before(killedAt) {
				afterKill = append(afterKill, r)
			}
		case r.err == nil && a.status == http.StatusOK:
			t.Errorf("%s answered %s; the upstream always answers ok", r.requestID, a)
		case r.err == nil && (a.uncertain("interrupted") || a.uncertain("running")):
			uncertain = append(uncertain, r)
		case r.err != nil || a.status == http.StatusServiceUnavailable:
			gaveUp = append(gaveUp, r)
		default:
			t.Errorf("%s answered %s", r.requestID, a)
		}
	}
	t.Logf("%d request_ids: %d completed (%d first tried after the kill), %d uncertain, %d gave up; the upstream saw %d request_ids",
		len(l.results), len(completed), len(afterKill), len(uncertain), len(gaveUp), len(byReq))
	for _, r := range append(uncertain, gaveUp...) {
		t.Logf("  %s after %d tries: %s %v", r.requestID, r.tries, r.answer, r.err)
	}

	// Fencing tokens grow: a client's next request_id is reserved after
	// its previous one was answered, so its token is greater.
	slices.SortFunc(l.results, func(a, b procResult) int { return cmp.Or(cmp.Compare(a.worker, b.worker), cmp.Compare(a.seq, b.seq)) })
	floor, worker := uint64(0), -1
	for _, r := range l.results {
		if r.worker != worker {
			floor, worker = 0, r.worker
		}
		exec, reached := execOf[r.requestID]
		if !reached {
			continue
		}
		tok := token[exec]
		if tok <= floor {
			t.Errorf("%s (execution %s) carried fencing token %d, not above %d of the same client's previous call", r.requestID, exec, tok, floor)
		}
		if r.completed() {
			floor = max(floor, tok)
		}
	}

	// Every completed call replays from a survivor.
	survivors := c.Running()
	for i, r := range completed {
		n := survivors[i%len(survivors)]
		procWantReplay(t, r.requestID+" replayed by "+n.ID(), procCall(t, n, r.body), r.answer.str("execution_id"))
	}
	return leader, afterKill, append(uncertain, gaveUp...)
}

// procInterruptedAndResolved: calls running on a follower that is killed
// become interrupted; resolving one as completed makes its retries replay
// that outcome, and releasing the other lets the next retry run the tool.
func procInterruptedAndResolved(t *testing.T, c *testutil.Cluster) {
	leader := c.Leader(t, procWait)
	followers := c.Followers(leader)
	x, observer := followers[0], followers[1]
	bodies := map[string]string{
		"resolved": `{"tool":"sleep","arguments":{"ms":60000},"request_id":"sleep-resolved"}`,
		"released": `{"tool":"sleep","arguments":{"ms":60000},"request_id":"sleep-released"}`,
	}
	var calls sync.WaitGroup
	long := &http.Client{Timeout: 90 * time.Second}
	for _, body := range bodies {
		calls.Go(func() { _, _ = procSend(long, http.MethodPost, x.URL+"/v1/tools/call", body) })
	}
	defer calls.Wait()

	execs := make(map[string]string)
	for name := range bodies {
		testutil.WaitFor(t, procWait, "sleep-"+name+" running on "+x.ID(), func() error {
			a, err := procSend(procClient, http.MethodGet, observer.URL+"/v1/executions?request_id=sleep-"+name, "")
			if err != nil {
				return err
			}
			if a.status != http.StatusOK || a.str("status") != "running" || a.str("node_id") != x.ID() {
				return fmt.Errorf("%s", a)
			}
			execs[name] = a.str("execution_id")
			return nil
		})
	}
	x.Kill()
	killedAt := time.Now()

	// A retry answers EXECUTION_UNCERTAIN, running, until the leader marks
	// the dead node's executions interrupted.
	testutil.WaitFor(t, 60*time.Second, "sleep-resolved interrupted", func() error {
		a, err := procSend(procClient, http.MethodPost, observer.URL+"/v1/tools/call", bodies["resolved"])
		switch {
		case err != nil:
			return err
		case a.uncertain("interrupted") && a.str("error", "execution_id") == execs["resolved"]:
			return nil
		case a.uncertain("running") && a.str("error", "execution_id") == execs["resolved"], a.status == http.StatusServiceUnavailable:
			return fmt.Errorf("%s", a)
		}
		t.Fatalf("a retry of sleep-resolved answered %s", a)
		return nil
	})
	t.Logf("%s's executions read as interrupted %s after the kill", x.ID(), time.Since(killedAt).Round(time.Millisecond))

	r := procDo(t, http.MethodPost, observer.URL+"/v1/executions/"+execs["resolved"]+"/resolve", `{"status":"completed","data":{"manual":true}}`)
	if r.status != http.StatusOK || !r.is(true, "resolved") || r.str("status") != "completed" || r.str("execution_id") != execs["resolved"] {
		t.Fatalf("resolve as completed: %s", r)
	}
	for _, n := range []*testutil.Node{observer, leader} {
		a := procCall(t, n, bodies["resolved"])
		procWantReplay(t, "a retry of sleep-resolved on "+n.ID(), a, execs["resolved"])
		if !a.is(true, "resolved") || !a.is(true, "data", "manual") || a.str("status") != "completed" {
			t.Fatalf("a retry of sleep-resolved on %s: %s, want the resolved outcome", n.ID(), a)
		}
	}

	a := procCall(t, leader, bodies["released"])
	if !a.uncertain("interrupted") || a.str("error", "execution_id") != execs["released"] {
		t.Fatalf("a retry of sleep-released: %s, want EXECUTION_UNCERTAIN interrupted", a)
	}
	if r := procDo(t, http.MethodPost, leader.URL+"/v1/executions/"+execs["released"]+"/resolve", `{"status":"released"}`); r.status != http.StatusOK {
		t.Fatalf("resolve as released: %s", r)
	}
	// The next retry runs the tool again (timeout_ms is not part of the
	// fingerprint: it keeps this run short).
	retry := strings.Replace(bodies["released"], `"request_id":"sleep-released"}`, `"request_id":"sleep-released","timeout_ms":300}`, 1)
	rerun := procCall(t, observer, retry)
	id := procWantRun(t, "the retry after the release", rerun, "timed_out")
	if id == execs["released"] {
		t.Fatalf("the retry after the release kept execution %s", id)
	}
	procWantReplay(t, "a retry of the new run", procCall(t, leader, bodies["released"]), id)
}
