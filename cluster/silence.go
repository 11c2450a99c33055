package cluster

import (
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"
)

// A follower of hashicorp/raft notices a silent leader late. Its check
// runs on a timer re-armed for a random 1–2 heartbeat timeouts each time
// it fires, and heartbeats do not reset it; so after the leader's last
// contact the follower starts an election only at the first check more
// than one heartbeat timeout later: anywhere from 1 to 3 timeouts after.
// In a 3-node cluster the election also waits for the slower of the two
// followers, since a follower that still trusts the old leader refuses
// the other's pre-vote. At the default 1 s timeout that was 1.3–2.7 s of
// stalled writes after a leader crashed.
//
// watchSilence shortens that slack, not the timeout: every tick (a
// twentieth of the heartbeat timeout) a follower looks at its last
// contact with a leader, and once the silence is longer than the
// heartbeat timeout plus a random jitter of up to half of it, it makes
// Raft run its check at once. The check is Raft's own (it still refuses
// to act on a silence shorter than the heartbeat timeout), and an
// election is Raft's own, with pre-vote; only its timing is earlier, so a
// crashed leader is replaced about 1–1.5 timeouts after it fell silent.
// The jitter keeps the two followers of a 3-node cluster from standing at
// once and splitting the vote.
//
// Raft runs the check at once when its heartbeat timeout is lowered
// (ReloadConfig notifies the follower loop); watchSilence lowers it by a
// nanosecond and puts it back, under reloadMu.

// silenceTick is how often watchSilence looks, as a fraction of the
// heartbeat timeout.
const silenceTick = 20

// silenceWatch decides when a follower's silence is long enough to check:
// past the heartbeat timeout plus the current jitter, and once for each
// last contact.
type silenceWatch struct {
	hb       time.Duration
	jitter   time.Duration
	nudgedAt time.Time // the last contact the latest nudge was for
	rand     func(n int64) int64
}

func newSilenceWatch(hb time.Duration, rnd func(n int64) int64) *silenceWatch {
	w := &silenceWatch{hb: hb, rand: rnd}
	w.jitter = w.draw()
	return w
}

func (w *silenceWatch) draw() time.Duration { return time.Duration(w.rand(int64(w.hb/2) + 1)) }

// due reports whether a follower whose last contact with a leader was at
// last should be checked now; a true answer counts as done (the next one
// needs a later contact).
func (w *silenceWatch) due(now, last time.Time) bool {
	if last.IsZero() || last.Equal(w.nudgedAt) || now.Sub(last) < w.hb+w.jitter {
		return false
	}
	w.nudgedAt = last
	w.jitter = w.draw()
	return true
}

// watchSilence runs until the node stops (see above).
func (n *Node) watchSilence() {
	hb := n.raft.ReloadableConfig().HeartbeatTimeout
	w := newSilenceWatch(hb, rand.Int64N)
	t := time.NewTicker(hb / silenceTick)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case now := <-t.C:
			last := n.raft.LastContact()
			if n.raft.State() == raft.Follower && w.due(now, last) {
				n.log.Info("no word from the leader past the heartbeat timeout; asking raft to check now",
					slog.Duration("silent_for", now.Sub(last).Round(time.Millisecond)))
				n.checkSilence()
			}
		}
	}
}

// checkSilence makes Raft's follower loop check the leader's silence now.
func (n *Node) checkSilence() {
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	rc := n.raft.ReloadableConfig()
	lower := rc
	lower.HeartbeatTimeout -= time.Nanosecond
	if err := n.raft.ReloadConfig(lower); err != nil {
		n.log.Debug("cannot nudge raft's heartbeat check", "err", err)
		return
	}
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("cannot restore raft's heartbeat timeout", "err", err)
	}
}
