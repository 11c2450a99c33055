package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stopChildAfter is how long a stdio child has to exit once its stdin is
// closed, before it is sent SIGTERM (and again before SIGKILL).
const stopChildAfter = 5 * time.Second

// stdioTransport starts one child for one connection; child is set once
// Connect has started it.
type stdioTransport struct {
	u     *Upstream
	child *child
}

// Connect starts the child and speaks MCP over its stdin and stdout, one
// message a line, each line bounded by the answer bound.
func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	ch, err := t.u.startChild()
	if err != nil {
		return nil, err
	}
	t.child = ch
	lines := &unitBody{unitReader: unitReader{r: ch.stdout, max: t.u.maxAnswer, over: ch.overflow}, Closer: noClose{}}
	inner, err := (&mcp.IOTransport{
		// The child's stdout is closed once it has exited (Close).
		Reader: lines,
		Writer: ch,
		// lines bounds each line; this bounds a message spread over
		// several lines (the SDK's count includes what it reads ahead).
		MaxLineLength: 2*t.u.maxAnswer + MinAnswerBytes,
	}).Connect(ctx)
	if err != nil {
		ch.kill()
		ch.Close()
		return nil, err
	}
	return &childConn{Connection: inner, child: ch}, nil
}

// noClose is the Closer of the child's stdout as the SDK sees it.
type noClose struct{}

func (noClose) Close() error { return nil }

// child is one running stdio server. Its Write and Close are the
// connection's writing side: Close stops the child.
type child struct {
	log    *slog.Logger
	cmd    *exec.Cmd
	stdin  *os.File // the write end of the child's stdin
	stdout *os.File // the read end of the child's stdout
	exited chan struct{}

	closeOnce sync.Once
	probing   atomic.Bool // a liveness check runs (probe)

	mu      sync.Mutex
	pending map[string]*callState // calls awaiting an answer, by JSON-RPC id

	// writing serialises the messages written to the child, so that the
	// bytes written while one is are its own; written counts them.
	writing sync.Mutex
	written atomic.Int64
}

// startChild starts the upstream's command with only the environment its
// config names (and PATH), in its own directory and process group, with
// no file descriptor but stdin, stdout and stderr.
func (u *Upstream) startChild() (*child, error) {
	cmd := exec.Command(u.cfg.Command[0], u.cfg.Command[1:]...)
	cmd.Env = u.childEnv // never nil: nil would pass on the node's
	cmd.Dir = u.cfg.Dir
	cmd.ExtraFiles = nil
	cmd.Stderr = &lineLogger{log: u.log}
	cmd.WaitDelay = time.Second // a grandchild holding stderr does not hold Wait
	ownGroup(cmd)
	keepFilesFromChildren()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting the child: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("starting the child: %w", err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	// The child's ends are its own now (or nobody's).
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("starting the child: %w", err)
	}
	c := &child{log: u.log, cmd: cmd, stdin: inW, stdout: outR, exited: make(chan struct{}), pending: make(map[string]*callState)}
	go func() {
		cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// Write writes to the child's stdin, counting what was written.
func (c *child) Write(p []byte) (int, error) {
	n, err := c.stdin.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// Close stops the child: its stdin is closed; if it has not exited
// within stopChildAfter it is sent SIGTERM, and after as long again
// SIGKILL. What is left of its process group is then killed.
func (c *child) Close() error {
	c.closeOnce.Do(func() {
		c.stdin.Close()
		if !c.waitExit(stopChildAfter) {
			signalGroup(c.cmd, syscall.SIGTERM)
			if !c.waitExit(stopChildAfter) {
				signalGroup(c.cmd, syscall.SIGKILL)
				<-c.exited
			}
		}
		signalGroup(c.cmd, syscall.SIGKILL)
		c.stdout.Close()
	})
	return nil
}

// kill ends the child (and its process group) at once; its connection
// then ends, and the upstream starts a new child.
func (c *child) kill() {
	select {
	case <-c.exited:
	default:
		signalGroup(c.cmd, syscall.SIGKILL)
	}
}

func (c *child) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.exited:
		return true
	case <-t.C:
		return false
	}
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// overflow is the line reader's report of a line past the bound: the call it
// answers (by the id at its head, or the only call pending) is marked too
// large, and the child, whose stream is out of step, is killed.
func (c *child) overflow(head []byte) {
	c.mu.Lock()
	st := c.pending[mustID(head)]
	if st == nil {
		var open []*callState
		for _, s := range c.pending {
			if !s.done.Load() {
				open = append(open, s)
			}
		}
		if len(open) == 1 {
			st = open[0]
		}
	}
	c.mu.Unlock()
	if st != nil {
		st.tooLarge.Store(true)
	}
	c.log.Warn("mcp server: a message of the child is larger than the bound; replacing the child", slog.Int("pid", c.pid()))
	c.kill()
}

// headID returns the JSON text of the "id" member of a JSON-RPC message,
// read from its first bytes, if they hold it whole.
func headID(head []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", false
		}
		if key, _ := t.(string); key == "id" {
			return string(v), true
		}
	}
	return "", false
}

// mustID is headID, or "" when the head holds no id.
func mustID(head []byte) string {
	id, _ := headID(head)
	return id
}

// idKey is the JSON text of a JSON-RPC id, as headID reads it.
func idKey(id jsonrpc.ID) string {
	b, _ := json.Marshal(id.Raw())
	return string(b)
}

// maxPending is the number of tracked calls above which track sweeps out
// those that have returned without an answer (timed out, say).
const maxPending = 64

func (c *child) track(id jsonrpc.ID, st *callState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) >= maxPending {
		for k, s := range c.pending {
			if s.done.Load() {
				delete(c.pending, k)
			}
		}
	}
	c.pending[idKey(id)] = st
}

func (c *child) untrack(id jsonrpc.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, idKey(id))
}

// childConn is the connection to a child, which remembers which call each
// request belongs to until its answer comes.
type childConn struct {
	mcp.Connection
	child *child
}

func (c *childConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	st, _ := ctx.Value(callKey{}).(*callState)
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && st != nil {
		c.child.track(req.ID, st)
	}
	if st == nil {
		return c.Connection.Write(ctx, msg)
	}
	// A call's request: whether any byte of it reached the child decides
	// between "never sent" and "answer lost" if no answer comes.
	c.child.writing.Lock()
	defer c.child.writing.Unlock()
	before := c.child.written.Load()
	err := c.Connection.Write(ctx, msg)
	if err == nil || c.child.written.Load() > before {
		st.written.Store(true)
		if st.onSent != nil {
			st.onSent()
		}
	}
	return err
}

func (c *childConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.child.untrack(resp.ID)
	}
	return msg, err
}
