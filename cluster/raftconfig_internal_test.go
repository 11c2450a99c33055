package cluster

import (
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The silence check makes Raft check a silent leader at once by lowering
// its heartbeat timeout by a nanosecond (silence.go). Raft refuses a
// configuration whose leader lease is longer than that timeout, so a lease
// as long as the timeout would quietly disable the check (measured:
// writes stalled 2 s instead of 1 after a leader was killed). Both the
// default and the fast timers must allow it.
func TestRaftConfigAllowsTheSilenceNudge(t *testing.T) {
	for _, fast := range []bool{false, true} {
		n := &Node{cfg: Config{NodeID: "n1", Fast: fast, SnapshotThreshold: 100, SnapshotInterval: time.Minute, Logger: slog.New(slog.DiscardHandler)}}
		c := n.raftConfig()
		if err := raft.ValidateConfig(c); err != nil {
			t.Fatalf("fast=%v: the config: %v", fast, err)
		}
		c.HeartbeatTimeout -= time.Nanosecond
		if err := raft.ValidateConfig(c); err != nil {
			t.Fatalf("fast=%v: the config with the heartbeat timeout lowered by 1 ns is refused: %v", fast, err)
		}
		if c.LeaderLeaseTimeout <= 500*time.Millisecond && !fast {
			t.Errorf("the leader lease is %s: a loaded leader steps down past Raft's default 500 ms (issue 29)", c.LeaderLeaseTimeout)
		}
	}
}
