package main_test

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store/audit"
)

// ledgerChain links drafts into an export, each entry one line.
func ledgerChain(drafts ...audit.Draft) (lines [][]byte) {
	lines, _ = ledgerChainHead(drafts...)
	return lines
}

// ledgerChainHead is ledgerChain that also returns the chain's head.
func ledgerChainHead(drafts ...audit.Draft) (lines [][]byte, h audit.Head) {
	h = audit.Start
	for _, d := range drafts {
		var e audit.Entry
		e, h = h.Next(d, nil)
		lines = append(lines, e.Line(nil))
	}
	return lines, h
}

func ledgerDraft(kind audit.Kind, exec, status string) audit.Draft {
	return audit.Draft{
		Time: time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC), Kind: kind, ExecutionID: exec, Principal: "anonymous",
		Actor: "n1", Tool: "echo", Fingerprint: strings.Repeat("f", 64), Status: status,
	}
}

// TestLedgerChecks: the checks TestLedgerUnderFaults makes of an export
// accept the sequences docs/audit.md allows and catch a duplicated, a
// missing and a misplaced entry; every flipped byte of a short chain (a
// signed checkpoint among its entries) is named by its seq.
func TestLedgerChecks(t *testing.T) {
	t.Parallel()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	good := []audit.Draft{
		ledgerDraft(audit.KindReserved, "exec_a", "running"),
		ledgerDraft(audit.KindReserved, "exec_b", "running"),
		ledgerDraft(audit.KindCompleted, "exec_a", "completed"),
		ledgerDraft(audit.KindInterrupted, "exec_b", "interrupted"),
		{Kind: audit.KindJoin, Actor: "anonymous", Target: "n4"},
		ledgerDraft(audit.KindResolved, "exec_b", "completed"),
		ledgerDraft(audit.KindReserved, "exec_c", "running"),
		ledgerDraft(audit.KindInterrupted, "exec_c", "interrupted"),
		ledgerDraft(audit.KindCompleted, "exec_c", "completed"), // a late result over the mark
		ledgerDraft(audit.KindReserved, "exec_d", "running"),
		ledgerDraft(audit.KindReleased, "exec_d", "released"),
	}
	// A checkpoint signing seq 3, as the leader appends one.
	_, third := ledgerChainHead(good[:3]...)
	signed := audit.Sign(key, third)
	good = append(good[:3], append([]audit.Draft{{Kind: audit.KindCheckpoint, Actor: "n1", Checkpoint: &signed}}, good[3:]...)...)
	lines := ledgerChain(good...)
	s, problems, err := checkLedger(bytes.NewReader(bytes.Join(lines, nil)))
	if err != nil || len(problems) > 0 {
		t.Fatalf("a good ledger: %v %q", err, problems)
	}
	if s.Entries != 12 || len(s.Execs) != 4 || len(s.Admin) != 1 || len(s.Checkpoints) != 1 || s.Execs["exec_b"].status != "completed" ||
		s.Execs["exec_d"].status != "released" || s.Signed[3] != 3 {
		t.Fatalf("a good ledger read as %+v", s)
	}

	for name, drafts := range map[string][]audit.Draft{
		"a final status twice": {ledgerDraft(audit.KindReserved, "exec_a", "running"), ledgerDraft(audit.KindCompleted, "exec_a", "completed"),
			ledgerDraft(audit.KindCompleted, "exec_a", "completed")},
		"no reserved":       {ledgerDraft(audit.KindCompleted, "exec_a", "completed")},
		"reserved twice":    {ledgerDraft(audit.KindReserved, "exec_a", "running"), ledgerDraft(audit.KindReserved, "exec_a", "running")},
		"interrupted after": {ledgerDraft(audit.KindReserved, "exec_a", "running"), ledgerDraft(audit.KindFailed, "exec_a", "failed"), ledgerDraft(audit.KindInterrupted, "exec_a", "interrupted")},
		"another tool": {ledgerDraft(audit.KindReserved, "exec_a", "running"), func() audit.Draft {
			d := ledgerDraft(audit.KindCompleted, "exec_a", "completed")
			d.Tool = "sleep"
			return d
		}()},
		"a wrong status": {ledgerDraft(audit.KindReserved, "exec_a", "running"), ledgerDraft(audit.KindCompleted, "exec_a", "failed")},
	} {
		if _, problems, err := checkLedger(bytes.NewReader(bytes.Join(ledgerChain(drafts...), nil))); err != nil || len(problems) != 1 {
			t.Errorf("%s: %v, problems %q; want one", name, err, problems)
		}
	}

	every := make([]int, len(lines))
	for i := range every {
		every[i] = i
	}
	flips, problems := checkFlips(lines, s, every, every)
	if len(problems) > 0 || flips < 12*300*len(flipMasks) {
		t.Fatalf("%d flips: %q", flips, problems)
	}
}
