package embed_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/embed"
	"github.com/carmyhq/carmy/tests/testutil"
)

// yamlNode adjusts the Settings startFromYAML builds, before NewConfig.
type yamlNode func(*embed.Settings)

// withEnv makes env the environment the config file's ${VAR} and
// token_env read (Settings.Getenv); nothing else is visible.
func withEnv(env map[string]string) yamlNode {
	return func(s *embed.Settings) { s.Getenv = func(name string) string { return env[name] } }
}

// withMaxBytes bounds the store's bytes as carmy serve's --max-bytes does.
func withMaxBytes(n int64) yamlNode {
	return func(s *embed.Settings) { s.MaxBytes = n }
}

// startFromYAML runs the node carmy serve --bootstrap runs from the config
// file text, in process: LoadConfig, NewConfig (a loopback listener on a
// port the kernel picks, a data dir in t.TempDir(), an empty environment
// unless withEnv), StartNode. It returns once the node is Ready (within
// 30 s) with the API's base URL; the node is closed at cleanup.
func startFromYAML(t *testing.T, text string, opts ...yamlNode) (string, *embed.Node) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "carmy.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	fc, err := embed.LoadConfig(path)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := embed.Settings{File: fc, NodeID: "n1", DataDir: filepath.Join(dir, "data"), Listener: ln, Logger: quietLogger(),
		NoPreviousExecutions: true, Getenv: func(string) string { return "" },
		Raft: &cluster.Config{RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Bootstrap: true, Fast: true,
			ClusterKey: "embedded-cluster-key-0123456789"}}
	for _, o := range opts {
		o(&s)
	}
	cfg, err := embed.NewConfig(s)
	if err != nil {
		ln.Close()
		t.Fatalf("NewConfig: %v", err)
	}
	node, err := embed.StartNode(t.Context(), cfg)
	if err != nil {
		t.Fatalf("StartNode: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := node.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	select {
	case <-node.Ready():
	case <-node.Done():
		t.Fatalf("the node stopped before it was ready: %v", node.Close(context.Background()))
	case <-time.After(30 * time.Second):
		t.Fatal("the node was not ready within 30s")
	}
	return "http://" + node.Addr().String(), node
}

// httpDo sends a request (with a bearer token unless token is empty) and
// returns the status and the raw answer.
func httpDo(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	return testutil.Do(t, method, url, token, body)
}

// logBuffer is a log a node writes while a test reads it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// withLog makes the node log into b, as text, from level INFO on (as
// carmy serve logs by default).
func withLog(b *logBuffer) yamlNode {
	return func(s *embed.Settings) { s.Logger = slog.New(slog.NewTextHandler(b, nil)) }
}

// withDev runs the node as carmy serve --dev does: the demo tools on,
// auth off.
func withDev() yamlNode {
	return func(s *embed.Settings) { s.Dev = true }
}
