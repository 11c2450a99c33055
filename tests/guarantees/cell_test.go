package guarantees_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// cell is one subtest of the matrix: a scenario on one back end over one
// route.
type cell struct {
	*testing.T
	e   *env
	r   route
	ctx context.Context
	id  string // backend/route/scenario, made into request_ids
}

// rid is a request_id of this cell, unique in the run.
func (c *cell) rid(tag string) string {
	return strings.NewReplacer("/", ".", "_", ".").Replace(c.id) + "." + tag
}

// tool is the route's tool of variant v and its upstream's ledger.
func (c *cell) tool(v variant) (string, ledger) { return c.e.fix.tool(c.r.kind, v) }

// at is the route's client of node n.
func (c *cell) at(n *testutil.Node) caller { return c.e.caller(c.T, c.r, n) }

// must fails the cell on a transport error.
func (c *cell) must(a answer, err error) answer {
	c.Helper()
	if err != nil {
		c.Fatalf("%s: %v", c.r.name, err)
	}
	return a
}

// call calls tool under rid on n with args and waits for the outcome.
func (c *cell) call(n *testutil.Node, tool, rid string, args map[string]any) answer {
	c.Helper()
	return c.must(c.at(n).call(c.ctx, call{Tool: tool, Args: args, RID: rid}))
}

// retry asks n once what rid's call of tool with args answers now.
func (c *cell) retry(n *testutil.Node, tool, rid string, args map[string]any) answer {
	c.Helper()
	return c.must(c.at(n).retry(c.ctx, call{Tool: tool, Args: args, RID: rid}))
}

// record is rid's record as n's HTTP API shows it (NOT_FOUND for none).
func (c *cell) record(n *testutil.Node, rid string) answer {
	c.Helper()
	return c.must(lookup(c.ctx, n.URL, rid))
}

// waitRecord polls rid's record on n until cond holds.
func (c *cell) waitRecord(n *testutil.Node, rid, what string, timeout time.Duration, cond func(answer) bool) answer {
	c.Helper()
	var last answer
	wait.For(c.T, timeout, rid+": "+what, func() error {
		a, err := lookup(c.ctx, n.URL, rid)
		if err != nil {
			return err
		}
		last = a
		if !cond(a) {
			return fmt.Errorf("the record is %s", a)
		}
		return nil
	})
	return last
}

// waitEvent polls l until rid has at least one event of kind.
func (c *cell) waitEvent(l ledger, rid, kind string, timeout time.Duration) {
	c.Helper()
	wait.Until(c.T, timeout, rid+": a "+kind+" on the upstream's ledger", func() bool { return l.count(c.T, rid, kind) > 0 })
}

// starts asserts how often the tool body started for rid.
func (c *cell) starts(l ledger, rid string, want int) {
	c.Helper()
	if got := l.count(c.T, rid, "start"); got != want {
		c.Errorf("%s: the tool started %d times, want %d: %v", rid, got, want, l.events(c.T, rid))
	}
}

// replayOf reports whether a is a replay of the execution id: flagged
// replayed, or, for a route that answers a retry with the same task, that
// task's result.
func (c *cell) replayOf(a answer, id string) bool {
	return a.ExecutionID == id && (a.Replayed || c.r.sameTask)
}

// replayed reports whether a is flagged a replay (or is the same task's
// result, on a route that answers a retry so).
func (c *cell) replayed(a answer) bool { return a.Replayed || c.r.sameTask }

// expect fails the cell unless ok, naming what was wanted and what came.
func (c *cell) expect(ok bool, want string, got answer) {
	c.Helper()
	if !ok {
		c.Errorf("want %s; got %s", want, got)
	}
}

// background runs f in its own goroutine and returns its answer's channel.
func background(f func() (answer, error)) <-chan answerOrErr {
	ch := make(chan answerOrErr, 1)
	go func() {
		a, err := f()
		ch <- answerOrErr{a, err}
	}()
	return ch
}

type answerOrErr struct {
	answer
	err error
}

// await returns the answer of a background call, failing after timeout.
func (c *cell) await(ch <-chan answerOrErr, timeout time.Duration) answerOrErr {
	c.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(timeout):
		c.Fatalf("no answer within %s", timeout)
		return answerOrErr{}
	}
}

// sendUntilStarted sends a call to n in the background and waits for its
// tool's start on the upstream's ledger, sending it again (the same
// request_id) whenever it comes back UNAVAILABLE with the tool not run:
// the route's upstream was still reconnecting after an earlier cell's
// fault, and nothing was recorded. Any other answer before the start
// fails the cell. The last call is left to its fate (a cell kills its
// node).
func (c *cell) sendUntilStarted(l ledger, n *testutil.Node, tool, rid string, args map[string]any, timeout time.Duration) {
	c.Helper()
	send := func() <-chan answerOrErr {
		return background(func() (answer, error) { return c.at(n).call(c.ctx, call{Tool: tool, Args: args, RID: rid}) })
	}
	ch := send()
	wait.Until(c.T, timeout, rid+": a start on the upstream's ledger", func() bool {
		if l.count(c.T, rid, "start") > 0 {
			return true
		}
		select {
		case r := <-ch:
			if r.err != nil || !r.refused("UNAVAILABLE", "") || (r.ToolRan != nil && *r.ToolRan) {
				c.Fatalf("%s: the call ended before its tool started: %s %v", rid, r.Raw, r.err)
			}
			ch = send()
		default:
		}
		return false
	})
}

// callServed calls as an agent does while an upstream comes back: again
// while the answer is UNAVAILABLE with the tool not run, for up to a
// minute, and returns the first other answer.
func (c *cell) callServed(n *testutil.Node, tool, rid string, args map[string]any) answer {
	c.Helper()
	var a answer
	wait.Until(c.T, time.Minute, rid+": an answer other than UNAVAILABLE", func() bool {
		a = c.call(n, tool, rid, args)
		return !(a.refused("UNAVAILABLE", "") && (a.ToolRan == nil || !*a.ToolRan))
	})
	return a
}

// upstreamDown takes the route's faulty upstream down, or brings it back.
func (c *cell) upstreamDown(down bool) {
	c.Helper()
	f := c.e.fix
	switch c.r.kind {
	case gatewayStdio:
		f.stdioFault.setDown(c.T, down)
		if down {
			f.stdioFault.killAll()
		}
	default:
		if down {
			f.fault.stop()
		} else {
			f.fault.start(c.T)
		}
	}
}

// upstreamRestart restarts the route's faulty upstream: a new process
// that knows none of the old one's sessions.
func (c *cell) upstreamRestart() {
	c.Helper()
	f := c.e.fix
	switch c.r.kind {
	case gatewayStdio:
		// Every node replaces its child: wait for as many new ones, so
		// that no request goes to a child that is dying (that one would
		// be a lost answer, which lostAnswerInterrupted checks).
		killed := f.stdioFault.killAll()
		wait.Until(c.T, time.Minute, "the nodes to replace their stdio children", func() bool {
			return f.stdioFault.children() >= killed
		})
	default:
		f.fault.stop()
		f.fault.start(c.T)
	}
}

// untilKnownDown waits until the entry node knows tool's upstream is down:
// a call without request_id (never recorded) is refused UNAVAILABLE. A
// stdio child killed a moment ago may still take a request, which would
// then be a lost answer rather than one never sent.
func (c *cell) untilKnownDown(tool string) {
	c.Helper()
	var a answer
	wait.Until(c.T, time.Minute, tool+": the node to know its upstream is down", func() bool {
		a = c.call(c.e.d.entry(), tool, "", ok(0))
		return a.refused("UNAVAILABLE", "")
	})
}

// cuttingTurn waits for the cell's turn to cut a connection and returns
// the function that ends it: over stdio a cut kills the child that other
// cells' calls of the same server would use, so those cells take turns;
// elsewhere a cut touches only its own connection.
func (c *cell) cuttingTurn() (done func()) {
	if c.r.kind != gatewayStdio {
		return func() {}
	}
	c.e.stdioCut.Lock()
	return c.e.stdioCut.Unlock
}
