package guarantees_test

import (
	"context"
	"time"
)

// scenario is one guarantee, or one fault at a seam, checked by run.
type scenario struct {
	name string
	run  func(c *cell)
}

// scenarios are the matrix's rows: the guarantees of docs/guarantees.md,
// then the faults.
var scenarios = []scenario{
	{"runs-once", runsOnce},
	{"replay", replay},
	{"conflict", conflict},
	{"uncertain-while-running", uncertainWhileRunning},
	{"timeout-recorded", timeoutRecorded},
	{"never-sent-released", neverSentReleased},
	{"lost-answer-interrupted", lostAnswerInterrupted},
	{"cancel", cancelRunning},
	{"resolve", resolveInterrupted},
	{"probe", probeSettles},
	{"upstream-restarted", upstreamRestarted},
	{"client-aborts", clientAborts},
	{"runner-killed", runnerKilled},
}

func ok(n int) map[string]any { return map[string]any{"mode": "ok", "n": n} }

func sleep(ms int) map[string]any { return map[string]any{"mode": "sleep", "ms": ms, "n": ms} }

// runsOnce: a new identity runs the tool once and answers its result.
func runsOnce(c *cell) {
	tool, l := c.tool(calm)
	rid := c.rid("a")
	a := c.call(c.e.d.entry(), tool, rid, ok(1))
	c.expect(a.is("completed") && !a.Replayed && a.dataN() == float64(1) && a.ExecutionID != "", "completed, not replayed, n=1", a)
	c.starts(l, rid, 1)
}

// replay: the same call again, on another node, is the recorded result.
func replay(c *cell) {
	tool, l := c.tool(calm)
	rid := c.rid("a")
	first := c.call(c.e.d.entry(), tool, rid, ok(2))
	c.expect(first.is("completed"), "completed", first)
	for _, n := range []int{0, 1} {
		node := c.e.d.other()
		if n == 1 {
			node = c.e.d.entry()
		}
		again := c.call(node, tool, rid, ok(2))
		c.expect(again.is("completed") && c.replayOf(again, first.ExecutionID) && again.dataN() == float64(2),
			"the first result replayed ("+first.ExecutionID+")", again)
	}
	c.starts(l, rid, 1)
}

// conflict: the same identity with other arguments is refused.
func conflict(c *cell) {
	tool, l := c.tool(calm)
	rid := c.rid("a")
	first := c.call(c.e.d.entry(), tool, rid, ok(3))
	c.expect(first.is("completed"), "completed", first)
	other := c.call(c.e.d.other(), tool, rid, ok(4))
	c.expect(other.refused("IDEMPOTENCY_CONFLICT", "") && other.ExecutionID == first.ExecutionID, "IDEMPOTENCY_CONFLICT naming "+first.ExecutionID, other)
	c.starts(l, rid, 1)
}

// uncertainWhileRunning: a retry while the first attempt runs is
// uncertain (running), never a second run; once it ends, it replays.
func uncertainWhileRunning(c *cell) {
	tool, l := c.tool(calm)
	rid := c.rid("a")
	args := sleep(3000)
	first := background(func() (answer, error) {
		return c.at(c.e.d.entry()).call(c.ctx, call{Tool: tool, Args: args, RID: rid})
	})
	c.waitEvent(l, rid, "start", 30*time.Second)
	during := c.retry(c.e.d.other(), tool, rid, args)
	c.expect(during.refused("EXECUTION_UNCERTAIN", "running"), "EXECUTION_UNCERTAIN running", during)
	done := c.await(first, 60*time.Second)
	if done.err != nil {
		c.Fatalf("the first call: %v", done.err)
	}
	c.expect(done.is("completed") && !done.Replayed, "the first call completed", done.answer)
	after := c.call(c.e.d.other(), tool, rid, args)
	c.expect(after.is("completed") && c.replayOf(after, done.ExecutionID), "a replay of the first call", after)
	c.starts(l, rid, 1)
}

// timeoutRecorded: a call past its timeout is timed_out, recorded and
// replayed; the upstream saw its request cancelled, and it never ran again.
func timeoutRecorded(c *cell) {
	tool, l := c.tool(calm)
	rid := c.rid("a")
	args := sleep(20000)
	a := c.must(c.at(c.e.d.entry()).call(c.ctx, call{Tool: tool, Args: args, RID: rid, TimeoutMS: 500}))
	c.expect(a.Code == "" && a.Status == "timed_out", "timed_out", a)
	c.waitEvent(l, rid, "cancelled", 30*time.Second)
	again := c.must(c.at(c.e.d.other()).call(c.ctx, call{Tool: tool, Args: args, RID: rid, TimeoutMS: 500}))
	c.expect(again.Code == "" && again.Status == "timed_out" && c.replayed(again), "timed_out replayed", again)
	c.starts(l, rid, 1)
	if n := l.count(c.T, rid, "effect"); n != 0 {
		c.Errorf("a timed-out call took effect %d times", n)
	}
}

// neverSentReleased: with its upstream down the call is refused before
// anything is sent, nothing is recorded, and the retry runs once the
// upstream is back.
func neverSentReleased(c *cell) {
	c.e.upstreamFault.Lock()
	defer c.e.upstreamFault.Unlock()
	tool, l := c.tool(faulty)
	rid := c.rid("a")
	c.upstreamDown(true)
	if c.r.kind == gatewayStdio {
		c.untilKnownDown(tool)
	}
	down := c.call(c.e.d.entry(), tool, rid, ok(5))
	c.expect(down.refused("UNAVAILABLE", "") && (down.ToolRan == nil || !*down.ToolRan), "UNAVAILABLE, the tool not run", down)
	if rec := c.record(c.e.d.other(), rid); rec.Code != "NOT_FOUND" {
		c.Errorf("a call never sent left a record: %s", rec)
	}
	c.starts(l, rid, 0)
	c.upstreamDown(false)
	a := c.callServed(c.e.d.entry(), tool, rid, ok(5))
	c.expect(a.is("completed") && !a.Replayed, "completed by the retry", a)
	c.starts(l, rid, 1)
}

// lostAnswerInterrupted: the upstream got the request and hung up: the
// effect may have happened, so the execution is interrupted, and every
// retry says so rather than running it again.
func lostAnswerInterrupted(c *cell) {
	defer c.cuttingTurn()()
	tool, l := c.tool(cutting)
	rid := c.rid("a")
	args := map[string]any{"mode": "cut", "n": 6}
	a := c.callServed(c.e.d.entry(), tool, rid, args)
	c.expect(a.refused("EXECUTION_UNCERTAIN", "interrupted"), "EXECUTION_UNCERTAIN interrupted", a)
	again := c.retry(c.e.d.other(), tool, rid, args)
	c.expect(again.refused("EXECUTION_UNCERTAIN", "interrupted"), "EXECUTION_UNCERTAIN interrupted on retry", again)
	c.starts(l, rid, 1)
}

// cancelRunning: cancelling a running execution records cancelled at once,
// ends the tool's run upstream, and is replayed.
func cancelRunning(c *cell) {
	tool, l := c.tool(calm)
	rid := c.rid("a")
	args := sleep(30000)
	first := background(func() (answer, error) {
		return c.at(c.e.d.entry()).call(c.ctx, call{Tool: tool, Args: args, RID: rid})
	})
	c.waitEvent(l, rid, "start", 30*time.Second)
	rec := c.record(c.e.d.other(), rid)
	cancelled := c.must(c.at(c.e.d.other()).cancel(c.ctx, rec.ExecutionID))
	c.expect(cancelled.Code == "" && cancelled.Status == "cancelled", "cancelled", cancelled)
	done := c.await(first, 60*time.Second)
	if done.err != nil {
		c.Fatalf("the cancelled call: %v", done.err)
	}
	c.expect(done.Code == "" && done.Status == "cancelled", "the call answered cancelled", done.answer)
	c.waitEvent(l, rid, "cancelled", 30*time.Second)
	again := c.call(c.e.d.entry(), tool, rid, args)
	c.expect(again.Code == "" && again.Status == "cancelled" && c.replayed(again), "cancelled replayed", again)
	c.starts(l, rid, 1)
}

// resolveInterrupted: an interrupted execution settled by the caller is
// replayed as settled; one released runs again on the next retry.
func resolveInterrupted(c *cell) {
	defer c.cuttingTurn()()
	tool, l := c.tool(cutting)
	rid := c.rid("done")
	args := map[string]any{"mode": "cut", "n": 7}
	a := c.callServed(c.e.d.entry(), tool, rid, args)
	c.expect(a.refused("EXECUTION_UNCERTAIN", "interrupted"), "EXECUTION_UNCERTAIN interrupted", a)
	rec := c.record(c.e.d.other(), rid)
	res := c.must(c.at(c.e.d.other()).resolve(c.ctx, rec.ExecutionID, map[string]any{"status": "completed", "data": map[string]any{"n": "settled"}}))
	c.expect(res.Code == "" && res.Status == "completed", "resolved completed", res)
	again := c.call(c.e.d.entry(), tool, rid, args)
	c.expect(again.is("completed") && c.replayed(again) && again.dataN() == "settled", "the settled result replayed", again)
	c.starts(l, rid, 1)

	rid = c.rid("released")
	args = map[string]any{"mode": "cutbefore", "n": 8}
	a = c.callServed(c.e.d.entry(), tool, rid, args)
	c.expect(a.refused("EXECUTION_UNCERTAIN", "interrupted"), "EXECUTION_UNCERTAIN interrupted", a)
	rec = c.record(c.e.d.other(), rid)
	res = c.must(c.at(c.e.d.other()).resolve(c.ctx, rec.ExecutionID, map[string]any{"status": "released"}))
	c.expect(res.Code == "" && res.Status == "released", "released", res)
	ran := c.callServed(c.e.d.entry(), tool, rid, ok(8))
	c.expect(ran.is("completed") && !ran.Replayed, "the retry after the release runs", ran)
	c.starts(l, rid, 2)
}

// probeSettles: the reconcile probe settles an interrupted execution: its
// effect found, completed (and replayed so); none found, released (and the
// retry runs).
func probeSettles(c *cell) {
	defer c.cuttingTurn()()
	tool, l := c.tool(probed)
	rid := c.rid("found")
	args := map[string]any{"mode": "cut", "n": 9}
	a := c.callServed(c.e.d.entry(), tool, rid, args)
	c.expect(a.refused("EXECUTION_UNCERTAIN", "interrupted") || a.is("completed"), "EXECUTION_UNCERTAIN interrupted (or already settled)", a)
	settled := c.waitRecord(c.e.d.other(), rid, "settled by the probe", 60*time.Second, func(a answer) bool { return a.Status == "completed" })
	c.expect(settled.Resolved && settled.dataN() == float64(9), "resolved completed with the upstream's result", settled)
	again := c.call(c.e.d.entry(), tool, rid, args)
	c.expect(again.is("completed") && c.replayed(again) && again.dataN() == float64(9), "the probed result replayed", again)
	c.starts(l, rid, 1)

	rid = c.rid("none")
	args = map[string]any{"mode": "cutbefore", "n": 10}
	a = c.callServed(c.e.d.entry(), tool, rid, args)
	c.expect(a.refused("EXECUTION_UNCERTAIN", "interrupted") || a.Code == "", "EXECUTION_UNCERTAIN interrupted", a)
	c.waitRecord(c.e.d.other(), rid, "released by the probe", 60*time.Second, func(a answer) bool { return a.Code == "NOT_FOUND" })
	ran := c.callServed(c.e.d.entry(), tool, rid, ok(10))
	c.expect(ran.is("completed") && !ran.Replayed, "the retry after the release runs", ran)
	c.starts(l, rid, 2)
}

// upstreamRestarted: across a restart of the upstream a finished call
// replays, and a new one runs once — never left uncertain.
func upstreamRestarted(c *cell) {
	c.e.upstreamFault.Lock()
	defer c.e.upstreamFault.Unlock()
	tool, l := c.tool(faulty)
	before := c.rid("before")
	first := c.callServed(c.e.d.entry(), tool, before, ok(11))
	c.expect(first.is("completed"), "completed", first)
	c.upstreamRestart()
	again := c.call(c.e.d.entry(), tool, before, ok(11))
	c.expect(again.is("completed") && c.replayed(again), "the finished call replayed at once", again)
	after := c.rid("after")
	a := c.callServed(c.e.d.entry(), tool, after, ok(12))
	c.expect(a.is("completed"), "completed", a)
	c.starts(l, before, 1)
	c.starts(l, after, 1)
}

// clientAborts: the caller gives up mid-call. Where giving up cancels
// (abortCancels), the execution is cancelled; elsewhere it runs to its
// end. Either way it is recorded, replayed, and ran once.
func clientAborts(c *cell) {
	tool, l := c.tool(calm)
	rid := c.rid("a")
	args := sleep(2000)
	ctx, abort := context.WithCancel(c.ctx)
	first := background(func() (answer, error) {
		return c.at(c.e.d.entry()).call(ctx, call{Tool: tool, Args: args, RID: rid})
	})
	c.waitEvent(l, rid, "start", 30*time.Second)
	abort()
	c.await(first, 30*time.Second)
	want := "completed"
	if c.r.abortCancels {
		want = "cancelled"
	}
	final := c.waitRecord(c.e.d.other(), rid, "finished", 60*time.Second, func(a answer) bool {
		return a.Code == "" && a.Status != "running"
	})
	c.expect(final.Status == want, want, final)
	again := c.call(c.e.d.entry(), tool, rid, args)
	c.expect(again.Code == "" && again.Status == want && c.replayed(again), want+" replayed", again)
	c.starts(l, rid, 1)
}

// runnerKilled: the node running a call is killed: its execution becomes
// interrupted (marked by the others, or by itself when it starts again),
// every retry says so, and the caller settles it.
func runnerKilled(c *cell) {
	c.e.world.RUnlock() // the cell holds the world shared; killing takes it alone
	c.e.world.Lock()
	defer func() {
		c.e.world.Unlock()
		c.e.world.RLock()
	}()
	tool, l := c.tool(calm)
	rid := c.rid("a")
	args := sleep(60000)
	runner := c.e.d.entry()
	c.sendUntilStarted(l, runner, tool, rid, args, 30*time.Second) // answered by no one: its node dies
	c.e.d.kill(c.T)
	c.e.forget()
	defer func() {
		c.e.d.restore(c.T)
		c.e.forget()
	}()
	survivor := c.e.d.other()
	marked := c.waitRecord(survivor, rid, "marked interrupted", 60*time.Second, func(a answer) bool { return a.Status == "interrupted" })
	again := c.retry(survivor, tool, rid, args)
	c.expect(again.refused("EXECUTION_UNCERTAIN", "interrupted"), "EXECUTION_UNCERTAIN interrupted", again)
	res := c.must(c.at(survivor).resolve(c.ctx, marked.ExecutionID, map[string]any{"status": "completed", "data": map[string]any{"n": "settled"}}))
	c.expect(res.Code == "" && res.Status == "completed", "resolved completed", res)
	after := c.call(survivor, tool, rid, args)
	c.expect(after.is("completed") && c.replayed(after) && after.dataN() == "settled", "the settled result replayed", after)
	c.starts(l, rid, 1)
}
