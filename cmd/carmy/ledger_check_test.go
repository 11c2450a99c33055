package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/carmyhq/carmy/store/audit"
)

// The checks TestLedgerUnderFaults makes of an export beyond its chain
// (which `carmy audit verify` checks): every execution's decisions appear
// once each and in the order docs/audit.md allows, and every admin action
// the test took appears.

// ledgerEntry is what the checks read of one exported entry.
type ledgerEntry struct {
	Seq         uint64      `json:"seq"`
	Kind        audit.Kind  `json:"kind"`
	ExecutionID string      `json:"execution_id"`
	Principal   string      `json:"principal"`
	Actor       string      `json:"actor"`
	Tool        string      `json:"tool"`
	Fingerprint string      `json:"fingerprint"`
	Status      string      `json:"status"`
	Target      string      `json:"target"`
	Hash        string      `json:"hash"`
	Checkpoint  *audit.Head `json:"checkpoint"`
}

// ledgerExec is where one execution stands in the ledger read so far.
type ledgerExec struct {
	// stage: 1 reserved, 2 interrupted, 3 settled (a final status, a
	// resolution or a release).
	stage                        int
	principal, tool, fingerprint string
	// status is the execution's status after its last entry.
	status string
}

// ledgerSummary is what checkLedger found.
type ledgerSummary struct {
	Entries int
	Kinds   map[audit.Kind]int
	// Execs is every execution's state after its last entry.
	Execs map[string]*ledgerExec
	// Admin holds the admin actions, in order; Checkpoints the seq of
	// every checkpoint entry.
	Admin       []ledgerEntry
	Checkpoints []uint64
	// SignLag is the most entries any checkpoint entry stands after the
	// head it signs.
	SignLag uint64
	// Heads[i] is the {seq, hash} of entry i+1.
	Heads []audit.Head
	// Signed[i] is the seq the checkpoint entry of seq i+1 signs (0 for
	// other kinds).
	Signed []uint64
}

// settles are the kinds that settle an execution, and the stages each may
// follow: a final status recorded by the runner (over an interrupted mark
// too: a late result), a cancel (of a running one; the runner's own
// cancelled over a mark), a resolution or a release (of a running one on a
// node gone, or of an interrupted one).
var settles = map[audit.Kind]bool{
	audit.KindCompleted: true, audit.KindFailed: true, audit.KindTimedOut: true, audit.KindCancelled: true,
	audit.KindResolved: true, audit.KindReleased: true,
}

// checkLedger reads an export from its first entry and returns what it
// holds and every way an execution's entries break the rules: an entry
// before its execution's reserved, a second reserved, an interrupted that
// does not follow the reserved, anything after a settling entry, a
// status that is not the kind's, or a principal, tool or fingerprint that
// changes within one execution. It does not check the chain.
func checkLedger(r io.Reader) (ledgerSummary, []string, error) {
	s := ledgerSummary{Kinds: map[audit.Kind]int{}, Execs: map[string]*ledgerExec{}}
	var problems []string
	bad := func(e ledgerEntry, format string, a ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf("seq %d (%s of %s): %s", e.Seq, e.Kind, e.ExecutionID, fmt.Sprintf(format, a...)))
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, audit.MaxLine), audit.MaxLine)
	for sc.Scan() {
		var e ledgerEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return s, problems, fmt.Errorf("line %d: %w", s.Entries+1, err)
		}
		s.Entries++
		s.Kinds[e.Kind]++
		s.Heads = append(s.Heads, audit.Head{Seq: e.Seq, Hash: e.Hash})
		signed := uint64(0)
		if e.Checkpoint != nil {
			signed = e.Checkpoint.Seq
		}
		s.Signed = append(s.Signed, signed)
		if e.Seq != uint64(s.Entries) {
			bad(e, "line %d holds seq %d", s.Entries, e.Seq)
		}
		switch e.Kind {
		case audit.KindJoin, audit.KindRemove, audit.KindTransfer:
			if e.ExecutionID != "" || e.Target == "" {
				bad(e, "an admin action with execution %q, target %q", e.ExecutionID, e.Target)
			}
			s.Admin = append(s.Admin, e)
			continue
		case audit.KindCheckpoint:
			if e.Checkpoint == nil || e.Checkpoint.Seq >= e.Seq {
				bad(e, "a checkpoint entry signing %+v", e.Checkpoint)
			}
			s.Checkpoints = append(s.Checkpoints, e.Seq)
			if e.Checkpoint != nil && e.Checkpoint.Seq < e.Seq {
				s.SignLag = max(s.SignLag, e.Seq-e.Checkpoint.Seq)
			}
			continue
		}
		x := s.Execs[e.ExecutionID]
		switch {
		case e.ExecutionID == "":
			bad(e, "a decision without an execution")
			continue
		case e.Kind == audit.KindReserved:
			if x != nil {
				bad(e, "a second reserved")
				continue
			}
			if e.Status != "running" {
				bad(e, "status %q", e.Status)
			}
			s.Execs[e.ExecutionID] = &ledgerExec{stage: 1, principal: e.Principal, tool: e.Tool, fingerprint: e.Fingerprint, status: e.Status}
			continue
		case x == nil:
			bad(e, "before its reserved")
			continue
		case x.stage == 3:
			bad(e, "after it was settled (%s)", x.status)
			continue
		case e.Kind == audit.KindInterrupted:
			if x.stage != 1 {
				bad(e, "a second interrupted")
			}
			if e.Status != "interrupted" {
				bad(e, "status %q", e.Status)
			}
			x.stage = 2
		case settles[e.Kind]:
			// A resolution's status is the outcome established; every other
			// settling entry's is its kind.
			ok := e.Status == string(e.Kind)
			if e.Kind == audit.KindResolved {
				ok = e.Status == "completed" || e.Status == "failed"
			}
			if !ok {
				bad(e, "status %q", e.Status)
			}
			x.stage = 3
		default:
			bad(e, "an unknown kind")
			continue
		}
		if e.Principal != x.principal || e.Tool != x.tool || e.Fingerprint != x.fingerprint {
			bad(e, "principal, tool or fingerprint %q %q %q, reserved as %q %q %q",
				e.Principal, e.Tool, e.Fingerprint, x.principal, x.tool, x.fingerprint)
		}
		x.status = e.Status
	}
	return s, problems, sc.Err()
}
