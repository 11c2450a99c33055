package raftlog

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// While the space check fails (the WAL cannot keep its margin), the
// leader's log counts as stalled on a full disk, though its queued writes
// go on (the entries on their way are written into the margin); a
// follower's append fails at once; once the check passes again, the
// stall ends by itself, with no write to end it.
func TestSpaceCheckStallsWhileWritesGoOn(t *testing.T) {
	s, l, leader := newFullableLeaderLog(t)
	var low atomic.Bool
	l.SetSpaceCheck(func() error {
		if low.Load() {
			return enospc
		}
		return nil
	})
	if err := l.StoreLogs(logsFrom(1, 2)); err != nil {
		t.Fatal(err)
	}
	if err := l.waitDurable(2); err != nil || l.QueueStalled() {
		t.Fatalf("before the disk fills: waitDurable %v, stalled %v", err, l.QueueStalled())
	}

	low.Store(true)
	if err := l.StoreLogs(logsFrom(3, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.waitDurable(3); err != nil {
		t.Fatalf("an entry on its way once the margin cannot be kept: %v, want it written", err)
	}
	wait.Until(t, 10*time.Second, "the log to count as stalled", l.QueueStalled)
	if _, err := l.Stalled(); !DiskFull(err) {
		t.Fatalf("Stalled: %v, want the disk-full error", err)
	}
	if err := l.StoreLogs(logsFrom(4, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.waitDurable(4); err != nil {
		t.Fatalf("a completion written while stalled for the margin: %v", err)
	}
	if last, _ := s.LastIndex(); last != 4 {
		t.Fatalf("the store holds up to %d, want 4", last)
	}

	leader.Store(false)
	if err := l.StoreLogs(logsFrom(5, 1)); !DiskFull(err) {
		t.Fatalf("a follower's append without its margin: %v, want the disk-full error", err)
	}
	if last, _ := s.LastIndex(); last != 4 {
		t.Fatalf("the follower's append was written (last %d) though its margin could not be kept", last)
	}

	low.Store(false)
	wait.Until(t, 10*time.Second, "the stall to end once there is room", func() bool {
		_, err := l.Stalled()
		return err == nil && !l.QueueStalled()
	})
	if err := l.StoreLogs(logsFrom(5, 1)); err != nil {
		t.Fatalf("a follower's append once there is room: %v", err)
	}
}
