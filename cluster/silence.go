package cluster

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster/peer"
)

// A follower of hashicorp/raft notices a silent leader late, and two
// followers can then keep each other from taking over:
//
//   - The check runs on a timer re-armed for a random 1–2 heartbeat
//     timeouts each time it fires, and heartbeats do not reset it; so after
//     the leader's last contact a follower stands only at the first check
//     more than one timeout later: 1 to 3 timeouts after.
//   - A follower that still trusts the old leader refuses another's
//     pre-vote, and one whose log is further along refuses a pre-vote from
//     one behind it. When the follower with the longer log stood first, it
//     was refused by the other (still trusting the leader), then refused
//     the other (behind it): both waited a random 1–2 election timeouts
//     before trying again.
//
// At the default 1 s timeouts writes stalled 1.3–3.1 s after a leader
// crashed under load. watchSilence shortens that, with Raft's own checks
// and elections, only earlier and in a better order. Every tick (a
// twentieth of the heartbeat timeout) a follower looks at its last contact
// with a leader. Once the silence passes the heartbeat timeout, it asks
// the other voters for the position of their logs (POST peer.PathSilence), then
// has each voter but the silent leader run Raft's check at once, one after
// the other, from the shortest log (term, then index, then id) to the
// longest, the longest last. A voter asked to check whose own silence is
// a little shorter (heartbeats go out every tenth to fifth of a timeout,
// so followers' last contacts differ by that much) waits until it too has
// been silent for a timeout. Each of them then holds no leader and refuses
// nobody for it; the last one stands once all others have, and every one
// of them grants it its pre-vote and vote (its log is at least as long as
// theirs). A crashed leader is so replaced about one timeout after it fell
// silent, and before Raft's own timer would have acted on most followers.
//
// Safety rests on Raft, unchanged: its check still refuses a silence
// shorter than the heartbeat timeout (a voter that still hears the leader
// stays its follower), and its elections decide as they would.
//
// Raft runs the check at once when its heartbeat timeout is lowered
// (ReloadConfig notifies the follower loop); checkSilence lowers it by a
// nanosecond and puts it back, under reloadMu.

const (
	// silenceTick is how often watchSilence looks, as a fraction of the
	// heartbeat timeout.
	silenceTick = 20
	// silenceGap separates the checks of two voters, so that the one
	// checked first has asked for its pre-vote (and been refused by the
	// next, which still trusts the leader) before the next one stands.
	silenceGap = 20 * time.Millisecond
)

// silenceWatch decides when a follower's silence is long enough to act
// on: past threshold, and once for each last contact.
type silenceWatch struct {
	threshold time.Duration
	actedOn   time.Time // the last contact the latest action was for
}

// due reports whether a follower whose last contact with a leader was at
// last should act now; a true answer counts as done (the next one needs
// a later contact).
func (w *silenceWatch) due(now, last time.Time) bool {
	if last.IsZero() || last.Equal(w.actedOn) || now.Sub(last) < w.threshold {
		return false
	}
	w.actedOn = last
	return true
}

// watchSilence runs until the node stops (see above).
func (n *Node) watchSilence() {
	hb := n.raft.ReloadableConfig().HeartbeatTimeout
	w := &silenceWatch{threshold: hb}
	t := time.NewTicker(hb / silenceTick)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case now := <-t.C:
			last := n.raft.LastContact()
			// A leader that answered this node's forwarded batches within
			// the timeout is busy, not silent: its heartbeats are late
			// behind the load (on a starved host, say), and an election
			// would only add to it (docs/operations.md#overload). Raft's own check still runs
			// on its timer.
			if n.raft.State() != raft.Follower || n.fwd.HeardSince(now.Add(-hb)) || !w.due(now, last) {
				continue
			}
			_, leader := n.raft.LeaderWithID()
			n.log.Info("no word from the leader past the heartbeat timeout; checking the voters in order",
				slog.String("leader", string(leader)), slog.Duration("silent_for", now.Sub(last).Round(time.Millisecond)))
			n.checkInOrder(leader, hb)
		}
	}
}

// silenceVoter is a voter checkInOrder checks.
type silenceVoter struct {
	id   string
	addr string // "" for this node
	pos  peer.LogPosition
}

// checkInOrder has every voter but silent run Raft's check, from the
// shortest log to the longest (see above). hb is the heartbeat timeout: a
// voter that does not give its position within a quarter of it is left
// out, and one asked to check may take half of it (serveSilence).
func (n *Node) checkInOrder(silent raft.ServerID, hb time.Duration) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		n.checkSilence()
		return
	}
	servers := f.Configuration().Servers
	if !slices.ContainsFunc(servers, func(s raft.Server) bool { return s.Suffrage == raft.Voter && string(s.ID) == n.cfg.NodeID }) {
		return // a non-voter stands in no election; the voters see to it
	}
	voters := []silenceVoter{{id: n.cfg.NodeID, pos: n.logPosition()}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range servers {
		if s.Suffrage != raft.Voter || s.ID == silent || string(s.ID) == n.cfg.NodeID {
			continue
		}
		addr, ok := n.httpAddrOf(string(s.ID))
		if !ok {
			continue
		}
		wg.Go(func() {
			pos, err := n.askSilence(addr, false, hb/4)
			if err != nil {
				n.log.Debug("a voter did not give its log position", slog.String("id", string(s.ID)), slog.Any("err", err))
				return
			}
			mu.Lock()
			voters = append(voters, silenceVoter{id: string(s.ID), addr: addr, pos: pos})
			mu.Unlock()
		})
	}
	wg.Wait()
	orderVoters(voters)
	for i, v := range voters {
		if i > 0 && !n.sleep(silenceGap) {
			return
		}
		if v.addr == "" {
			n.checkSilence()
			continue
		}
		if _, err := n.askSilence(v.addr, true, hb/2+hb/4); err != nil {
			n.log.Debug("a voter was not asked to check the leader's silence", slog.String("id", v.id), slog.Any("err", err))
		}
	}
}

// orderVoters sorts voters from the shortest log to the longest (term,
// then index), ids breaking ties: the order in which they are checked.
func orderVoters(voters []silenceVoter) {
	slices.SortFunc(voters, func(a, b silenceVoter) int {
		return cmp.Or(cmp.Compare(a.pos.LastTerm, b.pos.LastTerm), cmp.Compare(a.pos.LastIndex, b.pos.LastIndex), cmp.Compare(a.id, b.id))
	})
}

// askSilence tells the voter at addr that the leader is silent, and with
// check has it run Raft's check; it answers its log position.
func (n *Node) askSilence(addr string, check bool, wait time.Duration) (peer.LogPosition, error) {
	ctx, cancel := context.WithTimeout(n.bgCtx, wait)
	defer cancel()
	return n.client.Silence(ctx, addr, check)
}

// serveSilence answers another voter that found the leader silent: this
// node's log position, after running Raft's check when asked to (as a
// follower only; Raft's check acts only on a silence longer than the
// heartbeat timeout). A follower silent for half a timeout or more, but
// less than one, first waits until it has been silent for one: its last
// contact came a heartbeat later than the caller's.
func (n *Node) serveSilence(r *http.Request, check bool) peer.LogPosition {
	if check && n.raft.State() == raft.Follower {
		hb := n.raft.ReloadableConfig().HeartbeatTimeout
		if silent := time.Since(n.raft.LastContact()); silent >= hb/2 && silent < hb {
			n.sleep(hb - silent + time.Millisecond)
		}
		n.log.Info("asked to check the leader's silence", callerOf(r)...)
		n.checkSilence()
	}
	return n.logPosition()
}

// logPosition is the term and index of this node's last log entry.
func (n *Node) logPosition() peer.LogPosition {
	st := n.raft.Stats()
	term, _ := strconv.ParseUint(st["last_log_term"], 10, 64)
	index, _ := strconv.ParseUint(st["last_log_index"], 10, 64)
	return peer.LogPosition{LastTerm: term, LastIndex: index}
}

// httpAddrOf is the HTTP address of node id, from the member table or
// gossip.
func (n *Node) httpAddrOf(id string) (string, bool) {
	if info, ok := n.fsm.Node(id); ok && info.HTTPAddr != "" {
		return info.HTTPAddr, true
	}
	if info, ok := n.members.Info(id); ok && info.HTTPAddr != "" {
		return info.HTTPAddr, true
	}
	return "", false
}

// checkSilence makes Raft's follower loop check the leader's silence now.
func (n *Node) checkSilence() {
	n.reloadMu.Lock()
	defer n.reloadMu.Unlock()
	rc := n.raft.ReloadableConfig()
	lower := rc
	lower.HeartbeatTimeout -= time.Nanosecond
	if err := n.raft.ReloadConfig(lower); err != nil {
		n.log.Warn("cannot nudge raft's heartbeat check: a silent leader is replaced only at raft's own timer", slog.Any("err", err))
		return
	}
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("cannot restore raft's heartbeat timeout", slog.Any("err", err))
	}
}
