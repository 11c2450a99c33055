package testutil

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Metric reads one unlabelled series from the node's GET /metrics
// (without a token).
func (n *Node) Metric(name string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no metric %s", n.ID(), name)
}

// LoadAvg is the host's load averages over 1, 5 and 15 minutes, as
// /proc/loadavg tells them ("unknown" without it).
func LoadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// Terms reads every node's Raft term (carmy_raft_term).
func Terms(nodes []*Node) (map[string]float64, error) {
	terms := make(map[string]float64)
	for _, n := range nodes {
		v, err := n.Metric("carmy_raft_term")
		if err != nil {
			return nil, err
		}
		terms[n.ID()] = v
	}
	return terms, nil
}

// ElectionWatch tells whether the nodes held an election since it was
// made: a term that moved, or a leader that stepped down (it could not
// reach a quorum, or lost its leadership). A follower starved of CPU past
// its heartbeat timeout asks for a pre-vote, which the others refuse
// while they hear from the leader: the term does not move and the leader
// stays, so that is reported, not counted as an election.
type ElectionWatch struct {
	nodes []*Node
	terms map[string]float64
	logAt map[string]int
}

// WatchElections notes every node's term and how much it has logged.
func WatchElections(tb interface{ Fatal(...any) }, nodes []*Node) *ElectionWatch {
	terms, err := Terms(nodes)
	if err != nil {
		tb.Fatal(err)
	}
	w := &ElectionWatch{nodes: nodes, terms: terms, logAt: make(map[string]int)}
	for _, n := range nodes {
		w.logAt[n.ID()] = len(n.Logs())
	}
	return w
}

// electionSigns are the log lines of a leader stepping down; preVoteSigns
// those of a follower asking for a pre-vote.
var (
	electionSigns = []string{"failed to contact quorum", "leadership lost", "stepping down"}
	preVoteSigns  = []string{"entering candidate state", "heartbeat timeout reached"}
)

// Check returns, for each node, a line describing its term before and
// after and the leader changes it saw, and the first lines of an election
// each logged since; held is true when any node's term moved or any such
// line was logged.
func (w *ElectionWatch) Check() (report []string, held bool, err error) {
	after, err := Terms(w.nodes)
	if err != nil {
		return nil, false, err
	}
	for _, n := range w.nodes {
		id := n.ID()
		changes, _ := n.Metric("carmy_raft_leader_changes_total")
		signs, preVotes := 0, 0
		for line := range strings.Lines(n.Logs()[w.logAt[id]:]) {
			for _, sign := range electionSigns {
				if strings.Contains(line, sign) {
					if signs++; signs <= 3 {
						report = append(report, id+": "+strings.TrimSpace(line))
					}
				}
			}
			for _, sign := range preVoteSigns {
				if strings.Contains(line, sign) {
					if preVotes++; preVotes <= 2 {
						report = append(report, id+" (a pre-vote, not an election unless the term moved): "+strings.TrimSpace(line))
					}
				}
			}
		}
		report = append(report, fmt.Sprintf("%s: term %v before, %v after; %v leader changes seen since it started; %d log lines of a leader stepping down, %d of a pre-vote, since",
			id, w.terms[id], after[id], changes, signs, preVotes))
		if after[id] != w.terms[id] || signs > 0 {
			held = true
		}
	}
	return report, held, nil
}

// RequireNone logs what each node saw since w was made (Check) and fails
// tb when the nodes held an election: load alone must cause none (docs/operations.md#overload).
func (w *ElectionWatch) RequireNone(tb testing.TB) {
	tb.Helper()
	report, held, err := w.Check()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range report {
		tb.Log(line)
	}
	if held {
		tb.Error("an election was held under load alone")
	}
}
