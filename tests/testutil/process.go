package testutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ModuleRoot returns the directory holding the module's go.mod.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Node is a running carmy process.
type Node struct {
	// Addr is the HTTP API's host:port; URL is "http://" + Addr.
	Addr string
	URL  string
	bin  string
	args []string     // as given to Launch, after "serve"
	opts StartOptions // with Dir filled in
	cmd  *exec.Cmd
	logs *SyncBuffer
	done chan struct{}
	err  error // the process's exit, valid once done is closed
}

// StartOptions configure StartCarmy.
type StartOptions struct {
	// Env is added to the test process's environment.
	Env []string
	// Dir is the working directory (default: a temporary directory).
	Dir string
	// StatusToken, when set, is the bearer token the helpers' own reads
	// of GET /v1/cluster send (Node.ClusterStatus, Cluster.WaitFormed…):
	// the admin's, for a node whose config turns auth on.
	StatusToken string
}

var servingLine = regexp.MustCompile(`msg="serving the API" http_addr=(\S+) scheme=(\S+)`)

// StartCarmy starts `bin serve args…` and waits until it serves its API.
// Unless args name them, --http-addr, --raft-addr and --gossip-addr are
// 127.0.0.1:0; the data dir is under the working directory (a temporary
// one unless opts.Dir says otherwise). The node
// is killed when the test ends if it still runs.
func StartCarmy(tb testing.TB, bin string, opts StartOptions, args ...string) *Node {
	tb.Helper()
	n, err := Launch(tb, bin, opts, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// Launch starts the process like StartCarmy but returns an error when it
// exits before serving (so tests can check refusals).
func Launch(tb testing.TB, bin string, opts StartOptions, args ...string) (*Node, error) {
	tb.Helper()
	return launch(tb, bin, opts, args)
}

// launch starts a process whose lifetime (temporary directory, kill and
// log dump at the end) is owner's.
func launch(owner testing.TB, bin string, opts StartOptions, args []string) (*Node, error) {
	full := append([]string{"serve"}, args...)
	for flag, value := range map[string]string{
		"--http-addr": "127.0.0.1:0", "--raft-addr": "127.0.0.1:0", "--gossip-addr": "127.0.0.1:0",
	} {
		if !hasFlag(args, flag) {
			full = append(full, flag, value)
		}
	}
	if TestTLS() && !hasFlag(args, "--node-tls-ca") {
		id := "node1"
		for i, a := range args {
			if a == "--node-id" && i+1 < len(args) {
				id = args[i+1]
			} else if v, ok := strings.CutPrefix(a, "--node-id="); ok {
				id = v
			}
		}
		full = append(full, nodeTLSArgs(owner, owner.TempDir(), id)...)
	}
	cmd := exec.Command(bin, full...)
	cmd.Env = append(os.Environ(), opts.Env...)
	if opts.Dir == "" {
		opts.Dir = owner.TempDir()
	}
	cmd.Dir = opts.Dir
	n := &Node{bin: bin, args: append([]string(nil), args...), opts: opts, cmd: cmd, logs: &SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = n.logs, n.logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting carmy: %w", err)
	}
	go func() { n.err = cmd.Wait(); close(n.done) }()
	owner.Cleanup(func() {
		n.Kill()
		if owner.Failed() {
			owner.Logf("carmy %v output:\n%s", full, n.Logs())
		}
	})
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := servingLine.FindStringSubmatch(n.logs.String()); m != nil {
			n.Addr, n.URL = m[1], m[2]+"://"+m[1]
			return n, nil
		}
		select {
		case <-n.done:
			return n, fmt.Errorf("carmy exited before serving (%v):\n%s", n.err, n.Logs())
		case <-deadline:
			return n, fmt.Errorf("carmy did not serve within 30s:\n%s", n.Logs())
		case <-tick.C:
		}
	}
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || len(a) > len(name) && a[:len(name)+1] == name+"=" {
			return true
		}
	}
	return false
}

// PID returns the process's id.
func (n *Node) PID() int { return n.cmd.Process.Pid }

// Logs returns what the process printed so far.
func (n *Node) Logs() string { return n.logs.String() }

// ExitErr returns how the process exited; call it once it has (Running
// is false).
func (n *Node) ExitErr() error { return n.err }

// Stop sends SIGTERM and waits up to timeout for the process to exit. It
// returns the process's exit error (nil for exit status 0).
func (n *Node) Stop(timeout time.Duration) error {
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-n.done:
		return n.err
	case <-time.After(timeout):
		n.Kill()
		return fmt.Errorf("carmy did not exit within %s of SIGTERM", timeout)
	}
}

// Kill ends the process with SIGKILL and waits for it.
func (n *Node) Kill() {
	select {
	case <-n.done:
		return
	default:
	}
	_ = n.cmd.Process.Kill()
	<-n.done
}

// WaitReady polls GET /readyz until it answers 200.
func (n *Node) WaitReady(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("%s not ready within %s", n.Addr, timeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// SyncBuffer is a bytes.Buffer safe for one writer and many readers: a
// process's output, or a logger's, read by a test while it runs.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
