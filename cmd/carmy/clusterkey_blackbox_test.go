package main_test

// Black-box tests of node-to-node authentication (issue 14, finding 1): a
// built `carmy serve` trusts no caller of its peer (node-to-node)
// endpoints or of its Raft port for being on loopback. A node given no key
// generates one in its data dir; other nodes join with a copy of it.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/tests/testutil"
)

// preambleStream is a Raft stream layer that dials plain TCP and sends
// the connection preamble a node sends (naming no server): what a local
// process that knows the protocol, but no key, can do.
type preambleStream struct{ net.Listener }

func (s preambleStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte("carmy-raft/" + strconv.Itoa(nodeauth.ProtocolVersion) + " \n")); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// forgeAppend sends target an AppendEntries from a leader of a far later
// term that replaces the log from index 1 on: a follower that took it
// would drop what it held.
func forgeAppend(t *testing.T, target string) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tr := raft.NewNetworkTransportWithLogger(preambleStream{ln}, 1, 5*time.Second, hclog.New(&hclog.LoggerOptions{Output: io.Discard}))
	defer tr.Close()
	var resp raft.AppendEntriesResponse
	return tr.AppendEntries("n1", raft.ServerAddress(target), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("ghost"), Addr: []byte(ln.Addr().String())},
		Term:      1 << 40, PrevLogEntry: 0, PrevLogTerm: 0,
		Entries:           []*raft.Log{{Index: 1, Term: 1 << 40, Type: raft.LogCommand, Data: []byte("forged")}},
		LeaderCommitIndex: 0,
	}, &resp)
}

// clusterView is the part of GET /v1/cluster these tests read.
type clusterView struct {
	Capacity int `json:"capacity"`
	Nodes    []struct {
		ID string `json:"id"`
	} `json:"nodes"`
}

func getCluster(t *testing.T, base string) clusterView {
	t.Helper()
	code, body := bbGet(t, base+"/v1/cluster")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/cluster: %d %s", code, body)
	}
	var v clusterView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("GET /v1/cluster: %v: %s", err, body)
	}
	return v
}

// TestBlackBoxGeneratedClusterKey checks that a node started with no key
// (and no node TLS) generates one in its data dir, 0600, and says where;
// that its peer endpoints refuse a loopback caller without it (a
// forged capacity command is 403 and not applied); and that a second node
// given a copy of the file with --cluster-key-file joins and replicates.
func TestBlackBoxGeneratedClusterKey(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	if testutil.TestTLS() {
		t.Skip("about nodes without node TLS")
	}
	bin := testutil.BuildCarmy(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "n1")
	n1 := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--dev", "--fast-failover", "--node-id", "n1", "--data-dir", dataDir)
	n1.WaitReady(t, 30*time.Second)

	keyFile := filepath.Join(dataDir, "cluster-key")
	st, err := os.Stat(keyFile)
	if err != nil {
		t.Fatalf("no generated cluster key: %v\n%s", err, n1.Logs())
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", keyFile, st.Mode().Perm())
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if k := strings.TrimSpace(string(key)); len(k) < 16 {
		t.Fatalf("the generated key is %d characters", len(k))
	} else if strings.Contains(n1.Logs(), k) {
		t.Error("the log shows the cluster key")
	}
	// The node writes its log in batches (at most 50 ms late): poll.
	testutil.WaitFor(t, 10*time.Second, "the log to say where the key is and how others join with it", func() error {
		if logs := n1.Logs(); !strings.Contains(logs, keyFile) || !strings.Contains(logs, "--cluster-key-file") {
			return fmt.Errorf("not yet:\n%s", logs)
		}
		return nil
	})

	before := getCluster(t, n1.URL).Capacity
	cmd, err := fsm.Encode(fsm.SetLimits(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string][][]byte{"cmds": {cmd}})
	if err != nil {
		t.Fatal(err)
	}
	forged := string(body)
	for _, k := range []string{"", "wrong-key-wrong-key-wrong-key"} {
		req, _ := http.NewRequest(http.MethodPost, n1.URL+"/internal/v1/apply", strings.NewReader(forged))
		req.Header.Set("Content-Type", "application/json")
		if k != "" {
			req.Header.Set("Carmy-Cluster-Key", k)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a loopback caller with key %q: %d %s, want 403", k, resp.StatusCode, body)
		}
	}
	if after := getCluster(t, n1.URL).Capacity; after != before {
		t.Fatalf("a refused caller changed the capacity from %d to %d", before, after)
	}

	// A second node joins with a copy of the file.
	copied := filepath.Join(dir, "copy-of-cluster-key")
	if err := os.WriteFile(copied, key, 0o600); err != nil {
		t.Fatal(err)
	}
	n2 := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--dev", "--fast-failover", "--node-id", "n2",
		"--data-dir", filepath.Join(dir, "n2"), "--join", n1.Addr, "--cluster-key-file", copied)
	n2.WaitReady(t, 60*time.Second)
	testutil.WaitFor(t, 60*time.Second, "n2 in the configuration", func() error {
		if v := getCluster(t, n1.URL); len(v.Nodes) != 2 {
			return fmt.Errorf("%d nodes, want 2", len(v.Nodes))
		}
		return nil
	})
	// A write through n2 (forwarded to the leader with the key) is
	// replayed by n1.
	call := `{"tool":"echo","request_id":"through-n2","arguments":{"x":1}}`
	if code, body := bbPost(t, n2.URL+"/v1/tools/call", call); code != http.StatusOK {
		t.Fatalf("call through n2: %d %s", code, body)
	}
	testutil.WaitFor(t, 30*time.Second, "n1 to replay n2's call", func() error {
		code, body := bbPost(t, n1.URL+"/v1/tools/call", call)
		if code != http.StatusOK || !strings.Contains(body, `"replayed":true`) {
			return fmt.Errorf("not replayed: %d %s", code, body)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(dir, "n2", "cluster-key")); err == nil {
		t.Error("n2, given --cluster-key-file, generated a key of its own")
	}

	// A node given another key is refused, and its log says where the
	// right key is and how to give it, not only that it retries.
	wrongKey := filepath.Join(dir, "wrong-cluster-key")
	if err := os.WriteFile(wrongKey, []byte("Q2FybXkgdGVzdDogYSBrZXkgb2YgYW5vdGhlciBjbHVzdGVyLg==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n3 := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--dev", "--fast-failover", "--node-id", "n3",
		"--data-dir", filepath.Join(dir, "n3"), "--join", n1.Addr, "--cluster-key-file", wrongKey)
	testutil.WaitFor(t, 30*time.Second, "n3 to say why it is refused", func() error {
		logs := n3.Logs()
		for _, want := range []string{"join: refused", "<its data-dir>/cluster-key", "--cluster-key-file"} {
			if !strings.Contains(logs, want) {
				return fmt.Errorf("the log lacks %q", want)
			}
		}
		return nil
	})
	n3.Kill()
}

// TestBlackBoxSIGTERMAfterRaftGarbage checks that a node whose Raft port
// got garbage, a forged AppendEntries and a connection that never speaks
// still exits 0 within 15 s of SIGTERM (docs/cli.md#starting-restarting-stopping), and that it answered no
// forged RPC. Before, the forged entries truncated the log and the node's
// shutdown then hung for over a minute.
func TestBlackBoxSIGTERMAfterRaftGarbage(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	if testutil.TestTLS() {
		t.Skip("about nodes without node TLS")
	}
	bin := testutil.BuildCarmy(t)
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--dev", "--node-id", "n1", "--data-dir", filepath.Join(t.TempDir(), "n1"))
	n.WaitReady(t, 30*time.Second)
	call := `{"tool":"echo","request_id":"marker","arguments":{"x":1}}`
	if code, body := bbPost(t, n.URL+"/v1/tools/call", call); code != http.StatusOK {
		t.Fatalf("call: %d %s", code, body)
	}
	raftAddr := n.RaftAddr()
	if raftAddr == "" {
		t.Fatalf("no raft address in the log:\n%s", n.Logs())
	}
	if err := forgeAppend(t, raftAddr); err == nil {
		t.Error("the node answered a forged AppendEntries")
	}
	// Garbage, and a connection that stays silent.
	for _, payload := range []string{strings.Repeat("\x00\xffgarbage", 100), ""} {
		conn, err := net.Dial("tcp", raftAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if payload != "" {
			_, _ = conn.Write([]byte(payload))
		}
	}
	if code, body := bbPost(t, n.URL+"/v1/tools/call", call); code != http.StatusOK || !strings.Contains(body, `"replayed":true`) {
		t.Errorf("the call made before the forgery is no longer replayed: %d %s", code, body)
	}
	if err := n.Stop(15 * time.Second); err != nil {
		t.Fatalf("after garbage on the Raft port: %v", err)
	}
}
