package mcp

import (
	"log/slog"
	"time"

	"github.com/carmyhq/carmy/internal/mcpversion"
)

// What becomes of a tools/call whose client went away before its answer
// (the call's context ended while Runtime.Call waited: the client closed
// the response stream, or aborted the POST):
//
//   - at 2026-07-28 and later, which says a response stream the client
//     closes MUST be treated as cancellation, its execution is
//     cancelled as POST /v1/executions/{id}/cancel does (cancelled is
//     recorded, the tool's context ends);
//   - before (2025-06-18, 2025-11-25), the connection does not own the
//     execution: the tool runs on to its own end and is recorded, for
//     the next retry to replay. The call stays in the in-flight table
//     for detachedFor all the same (detached), so that a
//     notifications/cancelled that follows the aborted POST — the
//     official Go SDK sends one a few milliseconds after aborting, at
//     every version — still finds and cancels it.
//
// A task's call is never tracked (its lifetime is the task's): a closed
// stream cancels no task. The detached calls are bounded by age
// (detachedFor) and count (maxDetached, the oldest leave first), so a
// node's memory stays bounded however many clients go away.

// Bounds of the detached calls of a node.
const (
	detachedFor = 10 * time.Second
	maxDetached = 1024
)

// closedStreamCancels reports whether a client's closing the response
// stream of a call at protocol version cancels the call: from
// 2026-07-28 on.
func closedStreamCancels(version string) bool { return mcpversion.For(version).ClosedStreamCancels }

// ended is told, once Runtime.Call has returned, whether the client went
// away before the answer (gone). An answered call leaves the table; one
// whose client went away is cancelled now if its closed stream cancels
// it, else kept detached for a notifications/cancelled. A nil c (a call
// not tracked) is ignored.
func (c *inflightCall) ended(gone bool) {
	switch {
	case c == nil:
	case !gone:
		c.done()
	case c.streamCancels:
		c.done()
		c.h.log.Info("mcp: the client closed the stream of a tools/call before its answer: the call is cancelled",
			slog.String("principal", c.key.principal), slog.String("session_id", c.key.session), slog.String("request", c.key.id))
		c.cancelNow()
	default:
		c.h.inflight.detach(c, time.Now())
	}
}

// detach keeps c, whose client went away at now, in the table until
// detachedFor has passed, and takes out the detached calls whose time is
// up or that are beyond maxDetached.
func (t *inflight) detach(c *inflightCall, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.until = now.Add(detachedFor)
	t.detached = append(t.detached, c)
	t.expire(now)
}

// expire takes out of the table the detached calls whose time is up at
// now, and the oldest beyond maxDetached. t.mu is held.
func (t *inflight) expire(now time.Time) {
	n := 0
	for n < len(t.detached) && (len(t.detached)-n > maxDetached || !now.Before(t.detached[n].until)) {
		t.removeLocked(t.detached[n])
		t.detached[n] = nil
		n++
	}
	t.detached = t.detached[n:]
}
