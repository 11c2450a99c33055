package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/embed"
	"github.com/carmyhq/carmy/tests/testutil"
)

// logBuffer is an io.Writer safe for the server's goroutines and the test
// at once. Every write is announced on changed, so a test waits for a log
// line without polling on a timer.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLogBuffer() *logBuffer { return &logBuffer{changed: make(chan struct{}, 1)} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.changed <- struct{}{}:
	default:
	}
	return n, err
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// servingLine matches the line Runtime.Serve logs once it listens.
var servingLine = regexp.MustCompile(`msg="serving the API" http_addr=(\S+) scheme=(\S+)`)

// runningServe is a serve() running in a goroutine.
type runningServe struct {
	addr   string // host:port to dial
	scheme string // http or https, as the node logged
	// client makes the requests of get, post and waitReady: testClient
	// unless a test trusts a CA of its own.
	client *http.Client
	logs   *logBuffer
	cancel context.CancelFunc
	done   chan error
}

// stop cancels serve's context and returns what serve returned, failing
// the test if it does not return within the 15 s of docs/cli.md#starting-restarting-stopping.
func (s *runningServe) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(15 * time.Second):
		t.Fatalf("serve did not return within 15 s of its context ending; logs:\n%s", s.logs)
		return nil
	}
}

// startServe runs serve(args) and waits until it logs that it serves the
// API; it fails the test if serve returns first or takes too long.
//
// The node's Raft and gossip listeners take free loopback ports and its
// data dir is a fresh temporary directory (nodeArgs), unless args say
// otherwise: a later flag wins.
func startServe(t *testing.T, args ...string) *runningServe {
	t.Helper()
	args = append(nodeArgs(t), args...)
	ctx, cancel := context.WithCancel(context.Background())
	s := &runningServe{logs: newLogBuffer(), cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- serve(ctx, args, io.Discard, s.logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			t.Errorf("serve still running at cleanup; logs:\n%s", s.logs)
		}
	})

	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		if m := servingLine.FindStringSubmatch(s.logs.String()); m != nil {
			s.addr, s.scheme, s.client = dialable(t, m[1]), m[2], testClient
			return s
		}
		select {
		case <-s.logs.changed:
		case err := <-s.done:
			s.done <- err
			t.Fatalf("serve(%q) returned %v before serving; logs:\n%s", args, err, s.logs)
		case <-deadline.C:
			t.Fatalf("serve(%q) did not log %q within 10 s; logs:\n%s", args, "serving the API", s.logs)
		}
	}
}

// nodeArgs are the flags every in-process node gets, so that tests never
// use fixed ports or write under the package directory: Raft and gossip
// on free loopback ports, the data dir in a fresh temporary directory.
func nodeArgs(t *testing.T) []string {
	t.Helper()
	return []string{"--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--data-dir", t.TempDir()}
}

// waitReady polls GET /readyz until it answers 200, failing the test after
// a deadline. A node that bootstraps a cluster of one elects itself within
// a couple of seconds.
func (s *runningServe) waitReady(t *testing.T) {
	t.Helper()
	testutil.WaitFor(t, 15*time.Second, "GET /readyz = 200", func() error {
		resp, err := s.client.Get(s.url("/readyz"))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		return nil
	})
}

// dialable turns a listening address into one a client can dial: an
// unspecified host (0.0.0.0, ::) becomes the loopback address.
func dialable(t *testing.T, addr string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("logged http_addr %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

var testClient = &http.Client{Timeout: 10 * time.Second}

// url is the node's URL for path.
func (s *runningServe) url(path string) string { return s.scheme + "://" + s.addr + path }

// get sends GET path to the server, with a bearer token when token is set,
// and returns the status and body.
func (s *runningServe) get(t *testing.T, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// post sends POST path with a JSON body and returns the status, the
// Idempotent-Replayed header and the body.
func (s *runningServe) post(t *testing.T, path, body string) (int, string, string) {
	t.Helper()
	resp, err := s.client.Post(s.url(path), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the body: %v", path, err)
	}
	return resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), string(out)
}

// callResult is the part of a call's answer the tests look at.
type callResult struct {
	ExecutionID string          `json:"execution_id"`
	Status      string          `json:"status"`
	Data        json.RawMessage `json:"data"`
	Replayed    bool            `json:"replayed"`
}

func decodeCall(t *testing.T, body string) callResult {
	t.Helper()
	var r callResult
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("call answer %q: %v", body, err)
	}
	return r
}

// toolNames returns the names listed by GET /v1/tools.
func toolNames(t *testing.T, body string) []string {
	t.Helper()
	var out struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("GET /v1/tools: %v: %s", err, body)
	}
	var names []string
	for _, tl := range out.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func TestServeRefusesPublicAddressWithoutTokens(t *testing.T) {
	clearCarmyEnv(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		t.Run(addr, func(t *testing.T) {
			var stdout bytes.Buffer
			logs := newLogBuffer()
			err := serve(t.Context(), append(nodeArgs(t), "--http-addr", addr), &stdout, logs)
			if err == nil {
				t.Fatalf("serve --http-addr %s without tokens started", addr)
			}
			if !strings.Contains(err.Error(), "not a loopback address") || !strings.Contains(err.Error(), addr) {
				t.Errorf("err = %q, want it to say %s is not a loopback address", err, addr)
			}
			if strings.Contains(logs.String(), "serving the API") {
				t.Errorf("it served anyway; logs:\n%s", logs)
			}
		})
	}
}

// Anonymous callers need every listener on loopback, not only the API.
func TestServeRefusesPublicRaftOrGossipWithoutTokens(t *testing.T) {
	clearCarmyEnv(t)
	for _, flag := range []string{"--raft-addr", "--gossip-addr"} {
		t.Run(flag, func(t *testing.T) {
			err := serve(t.Context(), append(nodeArgs(t), "--http-addr", "127.0.0.1:0", flag, "0.0.0.0:0", "--cluster-key", testClusterKey), io.Discard, newLogBuffer())
			if err == nil || !strings.Contains(err.Error(), flag+" 0.0.0.0:0 is not a loopback address") {
				t.Fatalf("serve with %s off loopback and no tokens: %v", flag, err)
			}
		})
	}
}

func TestServeRefusesPublicAddressFromEnvironment(t *testing.T) {
	clearCarmyEnv(t)
	t.Setenv("CARMY_HTTP_ADDR", "0.0.0.0:0")
	err := serve(t.Context(), nodeArgs(t), io.Discard, newLogBuffer())
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("serve with CARMY_HTTP_ADDR=0.0.0.0:0 = %v, want a refusal", err)
	}
	// The refusal is embed.NewConfig's, typed.
	var oe *embed.OffLoopbackError
	if !errors.As(err, &oe) || oe.Flag != "--http-addr" || oe.Addr != "0.0.0.0:0" {
		t.Errorf("serve's refusal %v is not an *embed.OffLoopbackError of --http-addr 0.0.0.0:0", err)
	}
}

func TestServeDevStartsAndStops(t *testing.T) {
	clearCarmyEnv(t)
	s := startServe(t, "--dev", "--http-addr", "127.0.0.1:0", "--node-id", "n-test")

	if code, body := s.get(t, "/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz = %d %s, want 200", code, body)
	}
	code, body := s.get(t, "/v1/tools", "")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/tools = %d %s, want 200 (auth is off with --dev)", code, body)
	}
	if got, want := strings.Join(toolNames(t, body), ","), "create_order,echo,fail,lookup,sleep"; got != want {
		t.Errorf("tools = %s, want the demo tools %s", got, want)
	}
	// --dev bootstraps a cluster of one: once it has elected itself, it
	// runs and replays calls, and lists itself as the leader.
	s.waitReady(t)
	call := `{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"r-1"}`
	code, replayed, body := s.post(t, "/v1/tools/call", call)
	first := decodeCall(t, body)
	if code != http.StatusOK || first.Status != "completed" || first.Replayed || replayed != "" {
		t.Fatalf("first call = %d %s, want 200 completed, not replayed", code, body)
	}
	code, replayed, body = s.post(t, "/v1/tools/call", call)
	again := decodeCall(t, body)
	if code != http.StatusOK || !again.Replayed || replayed != "true" || again.ExecutionID != first.ExecutionID || string(again.Data) != string(first.Data) {
		t.Errorf("retry = %d (Idempotent-Replayed %q) %s, want the replay of %+v", code, replayed, body, first)
	}
	code, body = s.get(t, "/v1/cluster", "")
	var st struct {
		Leader *struct {
			ID string `json:"id"`
		} `json:"leader"`
		Nodes []struct {
			ID       string `json:"id"`
			Suffrage string `json:"suffrage"`
		} `json:"nodes"`
		Entries int `json:"entries"`
	}
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/cluster = %d %s (%v)", code, body, err)
	}
	if st.Leader == nil || st.Leader.ID != "n-test" || len(st.Nodes) != 1 || st.Nodes[0].ID != "n-test" || st.Nodes[0].Suffrage != "voter" || st.Entries != 1 {
		t.Errorf("GET /v1/cluster = %s, want n-test as the only voter and leader, with 1 entry", body)
	}

	logs := s.logs.String()
	for _, want := range []string{"dev mode", "node_id=n-test", "auth=false", "bootstrapped a new cluster"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs do not contain %q:\n%s", want, logs)
		}
	}

	if err := s.stop(t); err != nil {
		t.Errorf("serve returned %v after its context ended, want nil", err)
	}
	if !strings.Contains(s.logs.String(), `msg=stopped`) {
		t.Errorf("no stop line in the logs:\n%s", s.logs)
	}
	if _, err := testClient.Get("http://" + s.addr + "/healthz"); err == nil {
		t.Error("the API still answers after serve returned")
	}
}

func TestServeLoopbackWithoutDev(t *testing.T) {
	clearCarmyEnv(t)
	s := startServe(t, "--http-addr", "127.0.0.1:0")
	if code, body := s.get(t, "/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz = %d %s, want 200", code, body)
	}
	// No tools configured and no --dev: no demo tools.
	code, body := s.get(t, "/v1/tools", "")
	if code != http.StatusOK || len(toolNames(t, body)) != 0 {
		t.Errorf("GET /v1/tools = %d %s, want 200 and no tools", code, body)
	}
	// Neither --bootstrap nor --join: the node waits to be added, and is
	// not ready meanwhile.
	if code, body := s.get(t, "/readyz", ""); code != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz = %d %s, want 503 (no cluster yet)", code, body)
	}
	if !strings.Contains(s.logs.String(), "waiting to be added") {
		t.Errorf("the logs do not say the node waits to be added:\n%s", s.logs)
	}
	if err := s.stop(t); err != nil {
		t.Errorf("serve returned %v, want nil", err)
	}
}

func TestServeDevOnAllInterfaces(t *testing.T) {
	// docs/cli.md#starting-restarting-stopping: anonymous callers are allowed on a non-loopback address with
	// --dev; a listener off loopback needs the cluster key.
	clearCarmyEnv(t)
	s := startServe(t, "--dev", "--http-addr", "0.0.0.0:0", "--cluster-key", testClusterKey)
	if code, body := s.get(t, "/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz = %d %s, want 200", code, body)
	}
	if err := s.stop(t); err != nil {
		t.Errorf("serve returned %v, want nil", err)
	}
}

func TestServeWithConfig(t *testing.T) {
	clearCarmyEnv(t)
	t.Setenv("CARMY_TEST_PLANNER_TOKEN", "planner-secret-0001")
	t.Setenv("CARMY_TEST_ORDERS_TOKEN", "orders-secret")
	path := writeConfig(t, `tools:
  - name: create_order_http
    timeout: 5s
    http:
      url: http://127.0.0.1:9/orders
      headers: {Authorization: "Bearer ${CARMY_TEST_ORDERS_TOKEN}"}
demo_tools: true
auth:
  tokens:
    - {principal: planner, token_env: CARMY_TEST_PLANNER_TOKEN}
limits:
  body_bytes: 4096
`)
	// With tokens, a non-loopback address is allowed; the config path comes
	// from the environment.
	t.Setenv("CARMY_CONFIG", path)
	t.Setenv("CARMY_CLUSTER_KEY", testClusterKey)
	s := startServe(t, "--http-addr", "0.0.0.0:0", "--max-entries", "10")

	if code, _ := s.get(t, "/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz = %d, want 200 without a token", code)
	}
	if code, body := s.get(t, "/v1/tools", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/tools without a token = %d %s, want 401", code, body)
	}
	if code, body := s.get(t, "/v1/tools", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/tools with a wrong token = %d %s, want 401", code, body)
	}
	code, body := s.get(t, "/v1/tools", "planner-secret-0001")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/tools with the token = %d %s, want 200", code, body)
	}
	if got, want := strings.Join(toolNames(t, body), ","), "create_order,create_order_http,echo,fail,lookup,sleep"; got != want {
		t.Errorf("tools = %s, want %s", got, want)
	}
	if logs := s.logs.String(); !strings.Contains(logs, "auth=true") || !strings.Contains(logs, "max_entries=10") {
		t.Errorf("the start line does not report auth and max_entries:\n%s", logs)
	}
	if err := s.stop(t); err != nil {
		t.Errorf("serve returned %v, want nil", err)
	}
}

func TestServeDevTurnsAuthOff(t *testing.T) {
	clearCarmyEnv(t)
	t.Setenv("CARMY_TEST_PLANNER_TOKEN", "planner-secret-0001")
	path := writeConfig(t, "auth:\n  tokens:\n    - {principal: planner, token_env: CARMY_TEST_PLANNER_TOKEN}\n")
	s := startServe(t, "--dev", "--config", path, "--http-addr", "127.0.0.1:0")
	if code, body := s.get(t, "/v1/tools", ""); code != http.StatusOK {
		t.Errorf("GET /v1/tools without a token under --dev = %d %s, want 200", code, body)
	}
	if err := s.stop(t); err != nil {
		t.Errorf("serve returned %v, want nil", err)
	}
}

func TestServeStartupErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		config  string // file contents; "" for none
		args    []string
		env     map[string]string
		mention string
	}{
		{name: "missing config file", args: []string{"--config", dir + "/missing.yaml"}, mention: "missing.yaml"},
		{name: "unknown config key", config: "tool: []\n", mention: "tool"},
		{name: "tool without http", config: "tools:\n  - name: x\n", mention: "http"},
		{name: "unset url variable", config: "tools:\n  - name: x\n    http: {url: \"${CARMY_TEST_UNSET}/x\"}\n", mention: "CARMY_TEST_UNSET"},
		{name: "unset token variable", config: "auth:\n  tokens:\n    - {principal: p, token_env: CARMY_TEST_UNSET}\n", mention: "CARMY_TEST_UNSET"},
		{name: "invalid schema", config: "tools:\n  - name: x\n    input_schema: {type: 12}\n    http: {url: \"http://127.0.0.1:9/x\"}\n", mention: "input_schema"},
		{name: "duplicate tool", config: "tools:\n  - name: x\n    http: {url: \"http://127.0.0.1:9/x\"}\n  - name: x\n    http: {url: \"http://127.0.0.1:9/y\"}\n", mention: "twice"},
		{name: "tool named like a demo tool", config: "demo_tools: true\ntools:\n  - name: echo\n    http: {url: \"http://127.0.0.1:9/x\"}\n", mention: "echo"},
		{name: "bad environment value", env: map[string]string{"CARMY_MAX_ENTRIES": "abc"}, mention: "CARMY_MAX_ENTRIES"},
		{name: "bad flag value", args: []string{"--log-format", "xml"}, mention: "--log-format"},
		{name: "address in use", args: []string{"--http-addr", "USED"}, mention: "listen"},
		{name: "raft address in use", args: []string{"--raft-addr", "USED"}, mention: "raft"},
		{name: "bad retention", args: []string{"--retention", "forever"}, mention: "--retention"},
		{name: "bad retention from env", env: map[string]string{"CARMY_RETENTION": "1w"}, mention: "--retention \"1w\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearCarmyEnv(t)
			t.Setenv("CARMY_TEST_UNSET", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			args := append(append(nodeArgs(t), "--http-addr", "127.0.0.1:0"), tt.args...)
			if tt.config != "" {
				args = append(args, "--config", writeConfig(t, tt.config))
			}
			for i, a := range args {
				if a == "USED" {
					ln, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { ln.Close() })
					args[i] = ln.Addr().String()
				}
			}
			logs := newLogBuffer()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := serve(ctx, args, io.Discard, logs)
			if err == nil {
				t.Fatalf("serve(%q) = nil, want an error; logs:\n%s", args, logs)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("serve(%q) ran until the deadline instead of refusing to start", args)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("err = %q, want it to mention %q", err, tt.mention)
			}
			if strings.Contains(logs.String(), "serving the API") {
				t.Errorf("it served anyway; logs:\n%s", logs)
			}
		})
	}
}

func TestServeHelp(t *testing.T) {
	clearCarmyEnv(t)
	var stdout bytes.Buffer
	logs := newLogBuffer()
	if err := serve(t.Context(), []string{"--help"}, &stdout, logs); err != nil {
		t.Fatalf("serve --help = %v, want nil", err)
	}
	checkServeUsage(t, fmt.Sprint(stdout.String(), logs.String()))
}

// TestServeClusterKey checks how a node gets its cluster key (docs/cli.md#carmy-serve):
// with none and no node TLS it generates one in its data dir, on or off
// loopback; a key shorter than 16 bytes, both --cluster-key and
// --cluster-key-file, or a key file that is missing or empty are refused
// before the node opens anything; a key from the flag, the environment or
// a file is taken (off loopback too).
func TestServeClusterKey(t *testing.T) {
	keyFile := func(t *testing.T, text string) string {
		p := filepath.Join(t.TempDir(), "key")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	refusals := []struct {
		name string
		args func(t *testing.T) []string
		env  map[string]string
		want string
	}{
		{name: "short key", args: func(*testing.T) []string { return []string{"--cluster-key", "0123456789abcde"} }, want: "at least 16"},
		{name: "short key from the environment", env: map[string]string{"CARMY_CLUSTER_KEY": "short"}, want: "at least 16"},
		{name: "short key file", args: func(t *testing.T) []string { return []string{"--cluster-key-file", keyFile(t, "  short\n")} }, want: "at least 16"},
		{name: "empty key file", args: func(t *testing.T) []string { return []string{"--cluster-key-file", keyFile(t, " \n")} }, want: "empty"},
		{name: "missing key file", args: func(t *testing.T) []string { return []string{"--cluster-key-file", filepath.Join(t.TempDir(), "none")} }, want: "cluster-key-file"},
		{name: "key and key file", args: func(t *testing.T) []string {
			return []string{"--cluster-key", testClusterKey, "--cluster-key-file", keyFile(t, testClusterKey)}
		}, want: "exclude each other"},
		{name: "gossip key and gossip key file", args: func(t *testing.T) []string {
			return []string{"--gossip-key", "AAAAAAAAAAAAAAAAAAAAAA==", "--gossip-key-file", keyFile(t, "AAAAAAAAAAAAAAAAAAAAAA==")}
		}, want: "exclude each other"},
		{name: "bad gossip key file", args: func(t *testing.T) []string { return []string{"--gossip-key-file", keyFile(t, "not base64!")} }, want: "gossip-key-file"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			clearCarmyEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			dataDir := filepath.Join(t.TempDir(), "data")
			args := append(nodeArgs(t), "--dev", "--http-addr", "127.0.0.1:0", "--data-dir", dataDir)
			if tt.args != nil {
				args = append(args, tt.args(t)...)
			}
			logs := newLogBuffer()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := serve(ctx, args, io.Discard, logs)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("serve(%q) = %v, want an error saying %q", args, err, tt.want)
			}
			if strings.Contains(logs.String(), "serving the API") {
				t.Errorf("it served anyway; logs:\n%s", logs)
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the refused node created its data dir (%v)", err)
			}
		})
	}

	t.Run("generated off loopback, kept across restarts", func(t *testing.T) {
		clearCarmyEnv(t)
		dataDir := filepath.Join(t.TempDir(), "fresh", "data") // made 0700
		s := startServe(t, "--dev", "--http-addr", "0.0.0.0:0", "--data-dir", dataDir)
		s.waitReady(t)
		if err := s.stop(t); err != nil {
			t.Errorf("serve returned %v, want nil", err)
		}
		st, err := os.Stat(filepath.Join(dataDir, "cluster-key"))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("the generated key: %v, %v; want a 0600 file", st, err)
		}
		if dst, err := os.Stat(dataDir); err != nil || dst.Mode().Perm() != 0o700 {
			t.Errorf("the data dir made for the key: %v, %v; want 0700", dst, err)
		}
		first, _ := os.ReadFile(filepath.Join(dataDir, "cluster-key"))
		if !strings.Contains(s.logs.String(), "generated a cluster key") || strings.Contains(s.logs.String(), strings.TrimSpace(string(first))) {
			t.Errorf("want the generation logged, without the key; logs:\n%s", s.logs)
		}
		again := startServe(t, "--dev", "--http-addr", "127.0.0.1:0", "--data-dir", dataDir)
		again.waitReady(t)
		if err := again.stop(t); err != nil {
			t.Errorf("serve returned %v, want nil", err)
		}
		second, _ := os.ReadFile(filepath.Join(dataDir, "cluster-key"))
		if string(first) != string(second) || !strings.Contains(again.logs.String(), "using the cluster key kept in the data dir") {
			t.Errorf("the restarted node did not keep its key; logs:\n%s", again.logs)
		}
	})
	// With a key (from the flag, the environment or a file), the node
	// starts off loopback and generates none.
	for _, how := range []string{"flag", "environment", "file"} {
		t.Run("with the key from the "+how, func(t *testing.T) {
			clearCarmyEnv(t)
			dataDir := t.TempDir()
			args := []string{"--dev", "--http-addr", "0.0.0.0:0", "--data-dir", dataDir}
			switch how {
			case "flag":
				args = append(args, "--cluster-key", testClusterKey)
			case "environment":
				t.Setenv("CARMY_CLUSTER_KEY_FILE", keyFile(t, "\n  "+testClusterKey+"  \n"))
			case "file":
				args = append(args, "--cluster-key-file", keyFile(t, testClusterKey+"\n"))
			}
			s := startServe(t, args...)
			s.waitReady(t)
			if err := s.stop(t); err != nil {
				t.Errorf("serve returned %v, want nil", err)
			}
			if _, err := os.Stat(filepath.Join(dataDir, "cluster-key")); err == nil {
				t.Error("a node given a key generated one")
			}
		})
	}
}

func TestServeRestartKeepsRecords(t *testing.T) {
	// docs/cli.md#starting-restarting-stopping: a restarted node rejoins with its data dir alone, and the
	// records it replicated are still replayed.
	clearCarmyEnv(t)
	dir := t.TempDir()
	call := `{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"r-restart"}`

	s := startServe(t, "--dev", "--http-addr", "127.0.0.1:0", "--data-dir", dir)
	s.waitReady(t)
	code, _, body := s.post(t, "/v1/tools/call", call)
	first := decodeCall(t, body)
	if code != http.StatusOK || first.Status != "completed" {
		t.Fatalf("call = %d %s, want 200 completed", code, body)
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("serve returned %v, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "raft.db")); err != nil {
		t.Errorf("no raft.db in the data dir: %v", err)
	}

	// Without --dev (so without --bootstrap): the data dir alone.
	s = startServe(t, "--http-addr", "127.0.0.1:0", "--data-dir", dir, "--config", writeConfig(t, "demo_tools: true\n"))
	s.waitReady(t)
	code, replayed, body := s.post(t, "/v1/tools/call", call)
	again := decodeCall(t, body)
	if code != http.StatusOK || !again.Replayed || replayed != "true" || again.ExecutionID != first.ExecutionID || string(again.Data) != string(first.Data) {
		t.Errorf("after the restart: %d %s, want the replay of %+v", code, body, first)
	}
	if err := s.stop(t); err != nil {
		t.Errorf("serve returned %v, want nil", err)
	}
}

// TestServeGossipKey checks that --gossip-key reaches gossip: a node with
// the key is seen alive by the first node, a node without it joins Raft
// (the cluster key is separate) but is never seen by gossip.
func TestServeGossipKey(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	clearCarmyEnv(t)
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32))
	// One cluster key (they join each other); g2 gossips under the key
	// derived from it, g1 and g3 under the explicit one, which wins.
	t.Setenv("CARMY_CLUSTER_KEY", "gossip-test-cluster-key")
	n1 := startServe(t, "--dev", "--http-addr", "127.0.0.1:0", "--node-id", "g1", "--gossip-key", key)
	n1.waitReady(t)
	startServe(t, "--dev", "--http-addr", "127.0.0.1:0", "--node-id", "g2", "--join", n1.addr)
	startServe(t, "--dev", "--http-addr", "127.0.0.1:0", "--node-id", "g3", "--join", n1.addr, "--gossip-key", key)

	gossipOf := func() map[string]string {
		_, body := n1.get(t, "/v1/cluster", "")
		var st struct {
			Nodes []struct{ ID, Gossip string } `json:"nodes"`
		}
		_ = json.Unmarshal([]byte(body), &st)
		out := map[string]string{}
		for _, n := range st.Nodes {
			out[n.ID] = n.Gossip
		}
		return out
	}
	testutil.WaitFor(t, 30*time.Second, "g3 (with the key) alive and g2 (without) a member", func() error {
		g := gossipOf()
		if _, g2Member := g["g2"]; g["g3"] != "alive" || !g2Member {
			return fmt.Errorf("gossip %v", g)
		}
		return nil
	})
	if g := gossipOf(); g["g2"] == "alive" {
		t.Errorf("g2 has no gossip key but g1's gossip sees it alive: %v", g)
	}
}

// TestServeRefusesInsecureNodeOffLoopback checks the secure default: with
// tokens, Raft or gossip off loopback without node TLS and a gossip key is
// refused before anything listens, unless --insecure, which warns.
func TestServeRefusesInsecureNodeOffLoopback(t *testing.T) {
	clearCarmyEnv(t)
	t.Setenv("CARMY_TEST_PLANNER_TOKEN", "planner-secret-0001")
	cfg := writeConfig(t, "auth:\n  tokens:\n    - {principal: planner, token_env: CARMY_TEST_PLANNER_TOKEN}\n")
	// 192.0.2.1 (TEST-NET-1) is never this machine's: nothing can bind it,
	// so the check must refuse before any listener is opened.
	args := append(nodeArgs(t), "--config", cfg, "--http-addr", "127.0.0.1:0", "--raft-addr", "192.0.2.1:8300", "--cluster-key", testClusterKey)
	err := serve(t.Context(), args, io.Discard, newLogBuffer())
	if err == nil || !strings.Contains(err.Error(), "refusing to start") || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("Raft off loopback without TLS or a gossip key: %v, want a refusal naming --insecure", err)
	}
	logs := newLogBuffer()
	err = serve(t.Context(), append(args, "--insecure"), io.Discard, logs)
	if err != nil && strings.Contains(err.Error(), "refusing to start") {
		t.Fatalf("--insecure was refused: %v", err)
	}
	if !strings.Contains(logs.String(), "INSECURE") {
		t.Errorf("--insecure started without a warning; logs:\n%s", logs)
	}
}

// TestNormalStartLogsNoWarning: a node that starts as it should — a dev
// node, a cluster of one bootstrapping — logs nothing at WARN or above
// (issue 18, finding 6: every start warned that the leader had not set
// the capacity yet, while it was only electing itself). Warnings are for
// what an operator should look at.
func TestNormalStartLogsNoWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"dev", []string{"--dev"}},
		{"bootstrap", []string{"--bootstrap"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A data dir the node makes itself (a fresh one it finds
			// readable by others is worth the warning it gets).
			s := startServe(t, append(tc.args, "--http-addr", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "data"))...)
			s.waitReady(t)
			testutil.WaitFor(t, 15*time.Second, "the node to log that it takes calls", func() error {
				if logs := s.logs.String(); !strings.Contains(logs, "started: taking calls") {
					return fmt.Errorf("logs:\n%s", logs)
				}
				return nil
			})
			if err := s.stop(t); err != nil {
				t.Fatalf("serve returned %v", err)
			}
			for _, line := range strings.Split(s.logs.String(), "\n") {
				if strings.Contains(line, "dev mode: demo tools on, auth off") {
					continue // --dev's one warning, on purpose
				}
				if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
					t.Errorf("a normal start logged: %s", line)
				}
			}
		})
	}
}
