package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api/wire"
)

// seenRequest is what the fake admin API was sent.
type seenRequest struct {
	Method, Path, RawPath, Body, Auth, ContentType string
}

// fakeAdmin is an httptest.Server playing a node's admin API: it records
// every request and answers with status and answer (or, when block is
// set, not until the client gives up).
type fakeAdmin struct {
	srv *httptest.Server

	mu     sync.Mutex
	seen   []seenRequest
	status int
	answer string
	block  bool
}

func newFakeAdmin(t *testing.T, status int, answer string) *fakeAdmin {
	t.Helper()
	f := &fakeAdmin{status: status, answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{
			Method: r.Method, Path: r.URL.Path, RawPath: r.URL.EscapedPath(), Body: string(body),
			Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"),
		})
		status, answer, block := f.status, f.answer, f.block
		f.mu.Unlock()
		if block {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, answer)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// addr is the fake's host:port, as --addr takes it.
func (f *fakeAdmin) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

// requests returns what the fake was sent so far.
func (f *fakeAdmin) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// only returns the one request the fake was sent, failing the test
// otherwise.
func (f *fakeAdmin) only(t *testing.T) seenRequest {
	t.Helper()
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("the fake admin API got %d requests, want 1: %+v", len(reqs), reqs)
	}
	return reqs[0]
}

// runCluster runs `carmy cluster args…` with env as the environment.
func runCluster(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = clusterCmd(t.Context(), args, fakeEnv(env), &out, &errOut)
	return out.String(), errOut.String(), err
}

// threeNodes is a GET /v1/cluster answer of docs/api.md#cluster-administration,
// its nodes in the Raft configuration's order (the order they joined), not by id.
const threeNodes = `{"leader":{"id":"node1","http_addr":"127.0.0.1:8081"},
"nodes":[
 {"id":"node2","raft_addr":"127.0.0.1:8302","http_addr":"127.0.0.1:8082","suffrage":"voter","gossip":"suspect","version":"v1.3.0"},
 {"id":"node3","raft_addr":"127.0.0.1:8303","http_addr":"","suffrage":"nonvoter","gossip":"dead"},
 {"id":"node1","raft_addr":"127.0.0.1:8301","http_addr":"127.0.0.1:8081","suffrage":"voter","gossip":"alive","version":"v1.2.0"}],
"commit_index":12,"applied_index":11,"entries":3,"capacity":100000}`

// threeNodesTable is how carmy cluster prints threeNodes: sorted by id.
const threeNodesTable = `Leader: node1 (http 127.0.0.1:8081)

  ID     RAFT ADDR       HTTP ADDR       SUFFRAGE  GOSSIP   VERSION
* node1  127.0.0.1:8301  127.0.0.1:8081  voter     alive    v1.2.0
  node2  127.0.0.1:8302  127.0.0.1:8082  voter     suspect  v1.3.0
  node3  127.0.0.1:8303  -               nonvoter  dead     -

Commit index: 12, applied index: 11
Entries: 3 of capacity 100000
`

func TestClusterStatus(t *testing.T) {
	f := newFakeAdmin(t, http.StatusOK, threeNodes)
	stdout, stderr, err := runCluster(t, nil, "status", "--addr", f.addr(), "--token", "admin-secret-00001")
	if err != nil {
		t.Fatalf("cluster status: %v; stderr:\n%s", err, stderr)
	}
	r := f.only(t)
	if r.Method != http.MethodGet || r.Path != "/v1/cluster" || r.Body != "" {
		t.Errorf("request = %s %s %q, want GET /v1/cluster without a body", r.Method, r.Path, r.Body)
	}
	if r.Auth != "Bearer admin-secret-00001" {
		t.Errorf("Authorization = %q, want Bearer admin-secret-00001", r.Auth)
	}
	if stdout != threeNodesTable {
		t.Errorf("stdout =\n%s\nwant\n%s", stdout, threeNodesTable)
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing", stderr)
	}
}

func TestClusterStatusWithoutLeader(t *testing.T) {
	f := newFakeAdmin(t, http.StatusOK, `{"leader":null,"nodes":[{"id":"node2","raft_addr":"127.0.0.1:8302","http_addr":"127.0.0.1:8082","suffrage":"voter","gossip":"unknown"}],"commit_index":0,"applied_index":0,"entries":0,"capacity":0}`)
	stdout, _, err := runCluster(t, nil, "status", "--addr", f.addr())
	if err != nil {
		t.Fatalf("cluster status: %v", err)
	}
	if !strings.Contains(stdout, "Leader: none") || strings.Contains(stdout, "*") {
		t.Errorf("stdout =\n%s\nwant no leader and no line marked *", stdout)
	}
	if !regexp.MustCompile(`(?m)^  node2 +127\.0\.0\.1:8302 +127\.0\.0\.1:8082 +voter +unknown +-$`).MatchString(stdout) {
		t.Errorf("stdout =\n%s\nwant node2's line", stdout)
	}
}

func TestClusterStatusJSON(t *testing.T) {
	f := newFakeAdmin(t, http.StatusOK, threeNodes)
	stdout, _, err := runCluster(t, nil, "status", "--json", "--addr", f.addr())
	if err != nil {
		t.Fatalf("cluster status --json: %v", err)
	}
	if stdout != threeNodes+"\n" {
		t.Errorf("stdout = %q, want the answer as it is", stdout)
	}
	// Without a token, no Authorization header.
	if r := f.only(t); r.Auth != "" {
		t.Errorf("Authorization = %q without a token, want none", r.Auth)
	}
}

func TestClusterEnvironment(t *testing.T) {
	f := newFakeAdmin(t, http.StatusOK, threeNodes)
	env := map[string]string{"CARMY_ADDR": f.addr(), "CARMY_ADMIN_TOKEN": "from-env"}
	if _, _, err := runCluster(t, env, "status"); err != nil {
		t.Fatalf("cluster status with CARMY_ADDR: %v", err)
	}
	if r := f.only(t); r.Auth != "Bearer from-env" {
		t.Errorf("Authorization = %q, want the token of CARMY_ADMIN_TOKEN", r.Auth)
	}

	// Flags beat the environment.
	other := newFakeAdmin(t, http.StatusOK, threeNodes)
	if _, _, err := runCluster(t, env, "status", "--addr", other.addr(), "--token", "from-flag"); err != nil {
		t.Fatalf("cluster status: %v", err)
	}
	if r := other.only(t); r.Auth != "Bearer from-flag" {
		t.Errorf("Authorization = %q, want the --token", r.Auth)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("CARMY_ADDR's node got %d requests, want 1 (--addr wins)", n)
	}

	// An http:// URL works as --addr too.
	if _, _, err := runCluster(t, nil, "status", "--addr", f.srv.URL+"/"); err != nil {
		t.Fatalf("cluster status --addr %s/: %v", f.srv.URL, err)
	}
	if reqs := f.requests(); len(reqs) != 2 || reqs[1].Path != "/v1/cluster" {
		t.Errorf("requests = %+v, want a second GET /v1/cluster", reqs)
	}
}

func TestClusterDefaultAddr(t *testing.T) {
	o, _, err := parseClusterFlags("status", nil, fakeEnv(nil), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "127.0.0.1:8080" || o.Token != "" || o.JSON || o.Timeout != 10*time.Second {
		t.Errorf("defaults = %+v, want 127.0.0.1:8080, no token, no --json, 10s", o)
	}
}

func TestClusterJoin(t *testing.T) {
	for _, tc := range []struct {
		name, id, raft, http, wantFirst string
	}{
		{"a new node", "node4", "127.0.0.1:8304", "127.0.0.1:8084", "Added node4 (raft 127.0.0.1:8304, http 127.0.0.1:8084)."},
		// docs/api.md#cluster-administration: the same id and addresses again is a no-op; the
		// operator is told so, not "Added" (issue 18, finding 9).
		{"a member at the same addresses", "node1", "127.0.0.1:8301", "127.0.0.1:8081", "node1 is already a member at these addresses: nothing changed."},
		{"a member at new addresses", "node3", "127.0.0.1:8303", "127.0.0.1:8083", "Updated node3: raft 127.0.0.1:8303 (was 127.0.0.1:8303), http 127.0.0.1:8083 (was none)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAdmin(t, http.StatusOK, threeNodes)
			stdout, stderr, err := runCluster(t, map[string]string{"CARMY_ADMIN_TOKEN": "tok"},
				"join", "--addr", f.addr(), "--id", tc.id, "--raft-addr", tc.raft, "--http-addr", tc.http)
			if err != nil {
				t.Fatalf("cluster join: %v; stderr:\n%s", err, stderr)
			}
			reqs := f.requests()
			if len(reqs) != 2 || reqs[0].Method != http.MethodGet || reqs[0].Path != "/v1/cluster" {
				t.Fatalf("requests = %+v, want GET /v1/cluster then POST /v1/cluster/nodes", reqs)
			}
			r := reqs[1]
			if r.Method != http.MethodPost || r.Path != "/v1/cluster/nodes" || r.ContentType != "application/json" || r.Auth != "Bearer tok" {
				t.Errorf("request = %+v, want POST /v1/cluster/nodes, JSON, with the token", r)
			}
			var body map[string]any
			if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
				t.Fatalf("body %q: %v", r.Body, err)
			}
			want := map[string]any{"id": tc.id, "raft_addr": tc.raft, "http_addr": tc.http}
			if len(body) != len(want) || body["id"] != want["id"] || body["raft_addr"] != want["raft_addr"] || body["http_addr"] != want["http_addr"] {
				t.Errorf("body = %v, want %v (no other field: the API refuses unknown ones)", body, want)
			}
			if wantOut := tc.wantFirst + "\n\n" + threeNodesTable; stdout != wantOut {
				t.Errorf("stdout =\n%s\nwant\n%s", stdout, wantOut)
			}
		})
	}
}

func TestClusterRemove(t *testing.T) {
	for _, args := range [][]string{
		{"remove", "node3", "--addr", "ADDR"},
		{"remove", "--addr", "ADDR", "node3"},
		{"remove", "--addr", "ADDR", "--id", "node3"},
		{"remove", "--id", "node3", "--addr", "ADDR", "node3"},
		{"remove", "--addr", "ADDR", "--", "node3"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			f := newFakeAdmin(t, http.StatusOK, threeNodes)
			for i, a := range args {
				if a == "ADDR" {
					args[i] = f.addr()
				}
			}
			stdout, stderr, err := runCluster(t, nil, args...)
			if err != nil {
				t.Fatalf("cluster %q: %v; stderr:\n%s", args, err, stderr)
			}
			r := f.only(t)
			if r.Method != http.MethodDelete || r.Path != "/v1/cluster/nodes/node3" || r.Body != "" {
				t.Errorf("request = %s %s %q, want DELETE /v1/cluster/nodes/node3", r.Method, r.Path, r.Body)
			}
			if want := "Removed node3.\n\n" + threeNodesTable; stdout != want {
				t.Errorf("stdout =\n%s\nwant\n%s", stdout, want)
			}
		})
	}

	t.Run("escaped id", func(t *testing.T) {
		f := newFakeAdmin(t, http.StatusOK, threeNodes)
		if _, _, err := runCluster(t, nil, "remove", "--addr", f.addr(), "a?b#c"); err != nil {
			t.Fatal(err)
		}
		if r := f.only(t); r.Path != "/v1/cluster/nodes/a?b#c" {
			t.Errorf("path = %q (raw %q), want the id escaped into one segment", r.Path, r.RawPath)
		}
	})
}

func TestClusterAPIError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		answer string
		token  string
		want   string // the whole message after "carmy: "
	}{
		{"not found", 404, `{"error":{"code":"NOT_FOUND","message":"no member \"ghost\""}}`, "tok",
			`NOT_FOUND: no member "ghost"`},
		{"unavailable", 503, `{"error":{"code":"UNAVAILABLE","message":"no leader within 5s"}}`, "tok",
			"UNAVAILABLE: no leader within 5s"},
		{"extra fields", 400, `{"error":{"code":"INVALID_REQUEST","message":"\"id\" is required","field":"id"}}`, "tok",
			`INVALID_REQUEST: "id" is required`},
		{"forbidden without a token", 403, `{"error":{"code":"FORBIDDEN","message":"this endpoint needs the admin token"}}`, "",
			"FORBIDDEN: this endpoint needs the admin token (no admin token was given: set --token or $CARMY_ADMIN_TOKEN)"},
		{"unauthorized with a token", 401, `{"error":{"code":"UNAUTHORIZED","message":"unknown token"}}`, "wrong",
			"UNAUTHORIZED: unknown token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAdmin(t, tt.status, tt.answer)
			stdout, _, err := runCluster(t, map[string]string{"CARMY_ADMIN_TOKEN": tt.token}, "remove", "ghost", "--addr", f.addr())
			if err == nil {
				t.Fatalf("cluster remove answered %d: no error", tt.status)
			}
			var stderr bytes.Buffer
			if code := exitCode(err, &stderr); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if got, want := stderr.String(), "carmy: "+tt.want+"\n"; got != want {
				t.Errorf("stderr = %q, want %q", got, want)
			}
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != tt.status {
				t.Errorf("err = %#v, want an *apiError with status %d", err, tt.status)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}

	t.Run("with --json the answer is printed too", func(t *testing.T) {
		answer := `{"error":{"code":"NOT_FOUND","message":"no member \"ghost\""}}`
		f := newFakeAdmin(t, 404, answer)
		stdout, _, err := runCluster(t, nil, "remove", "ghost", "--json", "--addr", f.addr())
		if err == nil || !strings.Contains(err.Error(), "NOT_FOUND") {
			t.Errorf("err = %v, want NOT_FOUND", err)
		}
		if stdout != answer+"\n" {
			t.Errorf("stdout = %q, want the answer", stdout)
		}
	})

	t.Run("not the API's envelope", func(t *testing.T) {
		f := newFakeAdmin(t, http.StatusBadGateway, "<html>bad gateway</html>")
		_, _, err := runCluster(t, nil, "status", "--addr", f.addr())
		if err == nil || !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "bad gateway") {
			t.Errorf("err = %v, want the status and the body", err)
		}
	})

	t.Run("a 200 that is not a status", func(t *testing.T) {
		f := newFakeAdmin(t, http.StatusOK, "<html>hello</html>")
		_, _, err := runCluster(t, nil, "status", "--addr", f.addr())
		if err == nil || !strings.Contains(err.Error(), "not a cluster status") {
			t.Errorf("err = %v, want it to say the answer is not a cluster status", err)
		}
	})
}

func TestClusterUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now

	_, _, err = runCluster(t, nil, "status", "--addr", addr)
	if err == nil {
		t.Fatal("cluster status against a closed port: no error")
	}
	if errors.Is(err, errUsage) || !strings.Contains(err.Error(), "could not reach") || !strings.Contains(err.Error(), addr) {
		t.Errorf("err = %q, want it to say %s could not be reached", err, addr)
	}
	var stderr bytes.Buffer
	if code := exitCode(err, &stderr); code != 1 || !strings.HasPrefix(stderr.String(), "carmy: could not reach the node at "+addr) {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestClusterTimeout(t *testing.T) {
	f := newFakeAdmin(t, http.StatusOK, threeNodes)
	f.block = true
	start := time.Now()
	_, _, err := runCluster(t, nil, "status", "--addr", f.addr(), "--timeout", "200ms")
	if err == nil || !strings.Contains(err.Error(), "200ms") || !strings.Contains(err.Error(), f.addr()) {
		t.Errorf("err = %v, want no answer from %s within 200ms", err, f.addr())
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("cluster status --timeout 200ms took %s", elapsed)
	}
}

func TestClusterUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		mention []string
	}{
		{"no command", nil, []string{"Usage: carmy cluster", "status", "join", "remove"}},
		{"unknown command", []string{"frob"}, []string{`unknown command "frob"`, "Usage: carmy cluster"}},
		{"join without flags", []string{"join"}, []string{"--id, --raft-addr and --http-addr are required", "carmy cluster join --id"}},
		{"join without http-addr", []string{"join", "--id", "n2", "--raft-addr", "127.0.0.1:8302"}, []string{"--http-addr is required"}},
		{"join without id", []string{"join", "--raft-addr", "127.0.0.1:8302", "--http-addr", "127.0.0.1:8082"}, []string{"--id is required"}},
		{"join with a bad raft address", []string{"join", "--id", "n2", "--raft-addr", "8302", "--http-addr", "127.0.0.1:8082"}, []string{`--raft-addr "8302"`, "host:port"}},
		{"join with a positional id", []string{"join", "n2"}, []string{`unexpected argument "n2"`, "--id"}},
		{"remove without id", []string{"remove"}, []string{"which node", "carmy cluster remove node3"}},
		{"remove with two ids", []string{"remove", "a", "b"}, []string{"one node id"}},
		{"remove with two different ids", []string{"remove", "a", "--id", "b"}, []string{`"a"`, `"b"`}},
		{"remove with join's flags", []string{"remove", "a", "--raft-addr", "127.0.0.1:1"}, []string{"raft-addr"}},
		{"status with an argument", []string{"status", "now"}, []string{`unexpected argument "now"`}},
		{"status with --id", []string{"status", "--id", "x"}, []string{"-id"}},
		{"unknown flag", []string{"status", "--bogus"}, []string{"bogus", "carmy cluster --help"}},
		{"bad timeout", []string{"status", "--timeout", "soon"}, []string{"timeout"}},
		{"zero timeout", []string{"status", "--timeout", "0s"}, []string{"--timeout", "positive"}},
		{"bad addr", []string{"status", "--addr", "localhost"}, []string{`--addr "localhost"`, "host:port"}},
		{"bad addr url", []string{"status", "--addr", "http://"}, []string{"--addr"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAdmin(t, http.StatusOK, threeNodes)
			stdout, stderr, err := runCluster(t, map[string]string{"CARMY_ADDR": f.addr()}, tt.args...)
			if !errors.Is(err, errUsage) {
				t.Fatalf("cluster %q = %v, want errUsage", tt.args, err)
			}
			if code := exitCode(err, io.Discard); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			for _, m := range tt.mention {
				if !strings.Contains(stderr, m) {
					t.Errorf("stderr does not mention %q:\n%s", m, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if reqs := f.requests(); len(reqs) != 0 {
				t.Errorf("a usage error sent requests: %+v", reqs)
			}
		})
	}
}

func TestClusterHelp(t *testing.T) {
	for _, args := range [][]string{
		{"cluster", "--help"}, {"cluster", "-h"}, {"cluster", "help"},
		{"cluster", "status", "--help"}, {"cluster", "join", "-h"}, {"cluster", "remove", "--help"},
		{"help", "cluster"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), args, &stdout, &stderr); err != nil {
				t.Fatalf("run(%q) = %v, want nil", args, err)
			}
			for _, want := range []string{"Usage: carmy cluster", "status", "join --id ID --raft-addr H:P --http-addr H:P", "remove ID", "--addr", "$CARMY_ADDR", "--token", "$CARMY_ADMIN_TOKEN", "--json", "--timeout"} {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout does not contain %q:\n%s", want, stdout.String())
				}
			}
		})
	}
	// The top-level usage lists the cluster commands.
	var stdout bytes.Buffer
	if err := run(t.Context(), []string{"help"}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "carmy cluster status|join|remove") {
		t.Errorf("usage does not list carmy cluster:\n%s", stdout.String())
	}
}

func TestExitCode(t *testing.T) {
	var stderr bytes.Buffer
	if code := exitCode(nil, &stderr); code != 0 || stderr.Len() != 0 {
		t.Errorf("exitCode(nil) = %d, %q", code, stderr.String())
	}
	if code := exitCode(errUsage, &stderr); code != 2 || stderr.Len() != 0 {
		t.Errorf("exitCode(errUsage) = %d, %q; the usage was printed already", code, stderr.String())
	}
	if code := exitCode(errors.New("boom"), &stderr); code != 1 || stderr.String() != "carmy: boom\n" {
		t.Errorf("exitCode(boom) = %d, %q", code, stderr.String())
	}
}

// TestClusterAgainstARealNode runs `carmy cluster` against a node started
// in-process: a --dev node bootstraps a cluster of one and leads it.
func TestClusterAgainstARealNode(t *testing.T) {
	clearCarmyEnv(t)
	t.Setenv("CARMY_ADDR", "")
	t.Setenv("CARMY_ADMIN_TOKEN", "")
	s := startServe(t, "--dev", "--node-id", "solo", "--http-addr", "127.0.0.1:0",
		"--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	s.waitReady(t)

	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"cluster", "status", "--addr", s.addr}, &stdout, &stderr); err != nil {
		t.Fatalf("carmy cluster status: %v; stderr:\n%s", err, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "Leader: solo (http "+s.addr+")") {
		t.Errorf("stdout does not name solo at %s as the leader:\n%s", s.addr, out)
	}
	line := regexp.MustCompile(`(?m)^\* solo +127\.0\.0\.1:\d+ +` + regexp.QuoteMeta(s.addr) + ` +voter +alive +` + regexp.QuoteMeta(version) + `$`)
	if !line.MatchString(out) {
		t.Errorf("stdout has no line marking solo as the leader, a voter, alive, of version %s:\n%s", version, out)
	}
	if !regexp.MustCompile(`Entries: 0 of capacity 100000`).MatchString(out) {
		t.Errorf("stdout does not give the entries and capacity:\n%s", out)
	}

	// --json gives the API's answer.
	stdout.Reset()
	if err := run(t.Context(), []string{"cluster", "status", "--json", "--addr", s.addr}, &stdout, &stderr); err != nil {
		t.Fatalf("carmy cluster status --json: %v", err)
	}
	var st wire.ClusterStatus
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil || st.Leader == nil || st.Leader.ID != "solo" || len(st.Nodes) != 1 {
		t.Errorf("--json = %s (%v), want solo leading alone", stdout.String(), err)
	}

	// The API's errors come through: no such member.
	stdout.Reset()
	err := run(t.Context(), []string{"cluster", "remove", "ghost", "--addr", s.addr}, &stdout, &stderr)
	var msg bytes.Buffer
	if code := exitCode(err, &msg); code != 1 || !strings.HasPrefix(msg.String(), "carmy: NOT_FOUND: ") || !strings.Contains(msg.String(), "ghost") {
		t.Errorf("cluster remove ghost: exit %d, stderr %q; want carmy: NOT_FOUND naming ghost", code, msg.String())
	}
	if err := s.stop(t); err != nil {
		t.Errorf("serve returned %v, want nil", err)
	}
}

// TestClusterAgainstANodeWithAuth checks the admin token against a real
// node whose config names one.
func TestClusterAgainstANodeWithAuth(t *testing.T) {
	clearCarmyEnv(t)
	t.Setenv("CARMY_ADDR", "")
	t.Setenv("CARMY_ADMIN_TOKEN", "")
	t.Setenv("CARMY_TEST_PLANNER_TOKEN", "planner-secret-0001")
	t.Setenv("CARMY_TEST_ADMIN_TOKEN", "admin-secret-00001")
	path := writeConfig(t, `auth:
  tokens:
    - {principal: planner, token_env: CARMY_TEST_PLANNER_TOKEN}
  admin_token_env: CARMY_TEST_ADMIN_TOKEN
`)
	s := startServe(t, "--bootstrap", "--config", path, "--node-id", "guarded", "--http-addr", "127.0.0.1:0")
	s.waitReady(t)

	for _, tt := range []struct {
		token string
		code  string
	}{{"", "UNAUTHORIZED"}, {"planner-secret-0001", "FORBIDDEN"}} {
		var stderr bytes.Buffer
		err := run(t.Context(), []string{"cluster", "status", "--addr", s.addr, "--token", tt.token}, io.Discard, io.Discard)
		if code := exitCode(err, &stderr); code != 1 || !strings.HasPrefix(stderr.String(), "carmy: "+tt.code+": ") {
			t.Errorf("cluster status with token %q: exit %d, stderr %q; want %s", tt.token, code, stderr.String(), tt.code)
		}
	}
	t.Setenv("CARMY_ADMIN_TOKEN", "admin-secret-00001")
	var stdout bytes.Buffer
	if err := run(t.Context(), []string{"cluster", "status", "--addr", s.addr}, &stdout, io.Discard); err != nil {
		t.Fatalf("cluster status with $CARMY_ADMIN_TOKEN: %v", err)
	}
	if !strings.Contains(stdout.String(), "Leader: guarded") {
		t.Errorf("stdout =\n%s\nwant guarded as the leader", stdout.String())
	}
	if err := s.stop(t); err != nil {
		t.Errorf("serve returned %v, want nil", err)
	}
}
