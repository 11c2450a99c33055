package guarantees_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// upstreamBin is the suite's upstream (./upstream), built once.
var upstreamBin struct {
	once sync.Once
	path string
	err  error
}

func buildUpstream(tb testing.TB) string {
	tb.Helper()
	upstreamBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "carmy-guarantees-")
		if err != nil {
			upstreamBin.err = err
			return
		}
		upstreamBin.path = filepath.Join(dir, "upstream")
		cmd := exec.Command("go", "build", "-o", upstreamBin.path, "./tests/guarantees/upstream")
		cmd.Dir = testutil.ModuleRoot(tb)
		if out, err := cmd.CombinedOutput(); err != nil {
			upstreamBin.err = fmt.Errorf("building the upstream: %w\n%s", err, out)
		}
	})
	if upstreamBin.err != nil {
		tb.Fatal(upstreamBin.err)
	}
	return upstreamBin.path
}

// ledger is an upstream's ledger file: one line per start, effect and
// cancellation of a run of act.
type ledger string

type event struct {
	Ev   string `json:"ev"`
	RID  string `json:"request_id"`
	Exec string `json:"execution_id"`
}

func (l ledger) events(tb testing.TB, rid string) []event {
	tb.Helper()
	f, err := os.Open(string(l))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.RID == rid {
			out = append(out, e)
		}
	}
	return out
}

// count returns how many events of kind the ledger holds for rid.
func (l ledger) count(tb testing.TB, rid, kind string) int {
	tb.Helper()
	n := 0
	for _, e := range l.events(tb, rid) {
		if e.Ev == kind {
			n++
		}
	}
	return n
}

// httpUpstream is an upstream process serving HTTP (the tool, its probe
// and /mcp) on a fixed loopback address, so that it can be stopped and
// started again where the node's config points.
type httpUpstream struct {
	bin, addr string
	ledger    ledger
	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{}
}

func startHTTPUpstream(tb testing.TB, dir string) *httpUpstream {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	u := &httpUpstream{bin: buildUpstream(tb), addr: ln.Addr().String(), ledger: ledger(filepath.Join(dir, "ledger.ndjson"))}
	ln.Close()
	u.start(tb)
	tb.Cleanup(u.stop)
	return u
}

func (u *httpUpstream) url() string { return "http://" + u.addr }

// start starts the process on u's address and waits until it answers.
func (u *httpUpstream) start(tb testing.TB) {
	tb.Helper()
	u.mu.Lock()
	cmd := exec.Command(u.bin, "-http", u.addr, "-ledger", string(u.ledger))
	out := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		u.mu.Unlock()
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	u.cmd, u.done = cmd, done
	u.mu.Unlock()
	wait.For(tb, 30*time.Second, "the upstream on "+u.addr+" to answer", func() error {
		select {
		case <-done:
			return fmt.Errorf("the upstream exited: %s", out)
		default:
		}
		resp, err := http.Get(u.url() + "/probe/none")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
}

// stop kills the process (SIGKILL: down at once, with whatever it was
// doing) and waits for it.
func (u *httpUpstream) stop() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cmd == nil {
		return
	}
	_ = u.cmd.Process.Kill()
	<-u.done
	u.cmd = nil
}

// stdioUpstream is the command line of an MCP server over stdio, one
// child per node, with a file that keeps new children from starting
// (down) and a directory of their process ids.
type stdioUpstream struct {
	bin    string
	ledger ledger
	down   string
	pids   string
}

func newStdioUpstream(tb testing.TB, dir string) *stdioUpstream {
	tb.Helper()
	s := &stdioUpstream{bin: buildUpstream(tb), ledger: ledger(filepath.Join(dir, "ledger.ndjson")),
		down: filepath.Join(dir, "down"), pids: filepath.Join(dir, "pids")}
	if err := os.MkdirAll(s.pids, 0o700); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.killAll() })
	return s
}

// command is the server's command in the config file.
func (s *stdioUpstream) command() string {
	return fmt.Sprintf("[%q, -stdio, -ledger, %q, -down, %q, -pids, %q]", s.bin, string(s.ledger), s.down, s.pids)
}

// setDown makes new children exit at once (true) or start (false).
func (s *stdioUpstream) setDown(tb testing.TB, down bool) {
	tb.Helper()
	if down {
		if err := os.WriteFile(s.down, nil, 0o600); err != nil {
			tb.Fatal(err)
		}
		return
	}
	if err := os.Remove(s.down); err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
}

// killAll kills every child started so far and reports how many lived.
func (s *stdioUpstream) killAll() int {
	entries, _ := os.ReadDir(s.pids)
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// Only a process that is still this upstream: a pid may be reused.
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.HasPrefix(string(cmdline), s.bin+"\x00") && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
		os.Remove(filepath.Join(s.pids, e.Name()))
	}
	return n
}

// children counts the children started since the last killAll (each
// writes its pid file when it starts).
func (s *stdioUpstream) children() int {
	entries, _ := os.ReadDir(s.pids)
	return len(entries)
}
