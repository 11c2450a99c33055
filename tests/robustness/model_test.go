package robustness

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	fpA     = "fp-a"
	fpB     = "fp-b"
	key     = "p/s/order 7f3" // needs sanitising
	timeout = 30 * time.Second
)

// Builders of one identity's ops (Key key, node n1); times are in ns.

func newOK(c int, call, ret int64, exec, result string) Op {
	return Op{Client: c, Key: key, Fingerprint: fpA, Call: call, Return: ret, Kind: KindOK,
		ExecutionID: exec, Status: "completed", Result: result, Node: "n1"}
}

func replay(c int, call, ret int64, exec, result string) Op {
	op := newOK(c, call, ret, exec, result)
	op.Replayed = true
	return op
}

func uncertain(c int, call, ret int64, status, exec string) Op {
	return Op{Client: c, Key: key, Fingerprint: fpA, Call: call, Return: ret, Kind: KindUncertain,
		ExecutionID: exec, Status: status, Node: "n1"}
}

func conflict(c int, call, ret int64, fp, exec string) Op {
	return Op{Client: c, Key: key, Fingerprint: fp, Call: call, Return: ret, Kind: KindConflict,
		ExecutionID: exec, Node: "n1"}
}

func unavailable(c int, call, ret int64, fp string) Op {
	return Op{Client: c, Key: key, Fingerprint: fp, Call: call, Return: ret, Kind: KindUnavailable, Node: "n1"}
}

func unknown(c int, call int64, fp string) Op {
	return Op{Client: c, Key: key, Fingerprint: fp, Call: call, Kind: KindUnknown, Node: "n1"}
}

func withKey(op Op, k string) Op {
	op.Key = k
	return op
}

func TestAcceptedHistories(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
	}{
		{"sequential new then replays", []Op{
			newOK(0, 0, 10, "exec_x", "R"), replay(1, 20, 30, "exec_x", "R"), replay(2, 40, 50, "exec_x", "R")}},
		{"concurrent duplicate sees it running", []Op{
			newOK(0, 0, 100, "exec_x", "R"), uncertain(1, 10, 20, "running", "exec_x"), replay(2, 200, 210, "exec_x", "R")}},
		{"duplicate called as the new answer returns may see it running", []Op{
			newOK(0, 0, 10, "exec_x", "R"), uncertain(1, 10, 20, "running", "exec_x")}},
		{"concurrent duplicate replays before the new answer returns", []Op{
			newOK(0, 0, 100, "exec_x", "R"), replay(1, 10, 20, "exec_x", "R")}},
		{"concurrent duplicate sees it interrupted, then the runner records", []Op{
			newOK(0, 0, 100, "exec_x", "R"), uncertain(1, 10, 20, "interrupted", "exec_x"), replay(2, 200, 210, "exec_x", "R")}},
		{"conflict after a reservation", []Op{
			newOK(0, 0, 10, "exec_x", "R"), conflict(1, 5, 8, fpB, "exec_x"), conflict(2, 20, 30, fpB, "exec_x")}},
		{"unavailable, uncertain running, released, new", []Op{
			unavailable(0, 0, 10, fpA), uncertain(1, 20, 30, "running", "exec_x"),
			newOK(2, 40, 50, "exec_y", "R"), replay(3, 60, 70, "exec_y", "R")}},
		{"unknown, then replays of an exec first seen in a replay", []Op{
			unknown(0, 0, fpA), replay(1, 20, 30, "exec_x", "R"), replay(2, 40, 50, "exec_x", "R")}},
		{"interrupted reports, then a replay of the final result", []Op{
			unknown(0, 0, fpA), uncertain(1, 10, 20, "interrupted", "exec_x"),
			uncertain(2, 30, 40, "interrupted", "exec_x"), replay(3, 50, 60, "exec_x", "R")}},
		{"unknown reservation of another fingerprint, released, new", []Op{
			unknown(0, 0, fpB), conflict(1, 10, 20, fpA, "exec_x"), newOK(2, 30, 40, "exec_y", "R")}},
		{"unknown ops never return", []Op{
			// The unknown op's Return (5) is ignored: it reserves exec_y
			// after exec_x, which was seen at 10..20, was released.
			unavailable(0, 0, 5, fpA), func() Op { op := unknown(1, 0, fpA); op.Return = 5; return op }(),
			uncertain(2, 10, 20, "running", "exec_x"), replay(3, 30, 40, "exec_y", "R")}},
		{"interrupted, released by the probe, run by a retry", []Op{
			unknown(0, 0, fpA), uncertain(1, 10, 20, "interrupted", "exec_x"),
			newOK(2, 30, 40, "exec_y", "R"), replay(3, 50, 60, "exec_y", "R")}},
		{"unavailable, interrupted (its node died), released by the probe, new", []Op{
			unavailable(0, 0, 10, fpA), uncertain(1, 20, 30, "interrupted", "exec_x"),
			uncertain(2, 40, 50, "interrupted", "exec_x"), newOK(3, 60, 70, "exec_y", "R")}},
		{"interrupted, released, then reserved with other arguments", []Op{
			unknown(0, 0, fpA), uncertain(1, 10, 20, "interrupted", "exec_x"),
			func() Op { op := newOK(2, 30, 40, "exec_y", "S"); op.Fingerprint = fpB; return op }(), conflict(3, 50, 60, fpA, "exec_y")}},
		{"a lost answer: the call itself interrupted, released by the probe, run by a retry", []Op{
			uncertain(0, 0, 10, "interrupted", "exec_x"), uncertain(1, 20, 30, "interrupted", "exec_x"),
			newOK(2, 40, 50, "exec_y", "R"), replay(3, 60, 70, "exec_y", "R")}},
		{"a lost answer seen running by a concurrent duplicate, released by the probe, run by a retry", []Op{
			uncertain(0, 0, 10, "interrupted", "exec_x"), uncertain(1, 2, 8, "running", "exec_x"),
			uncertain(1, 20, 30, "interrupted", "exec_x"), newOK(2, 40, 50, "exec_y", "R")}},
		{"a lost answer, completed by the probe", []Op{
			uncertain(0, 0, 10, "interrupted", "exec_x"), replay(1, 20, 30, "exec_x", "R")}},
		{"identities are independent", []Op{
			withKey(newOK(0, 0, 10, "exec_x", "R"), "k1"), withKey(newOK(0, 5, 15, "exec_y", "S"), "k2"),
			withKey(replay(1, 20, 30, "exec_x", "R"), "k1"), withKey(replay(1, 40, 50, "exec_y", "S"), "k2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			v, err := CheckHistory(tc.ops, dir, timeout)
			if err != nil {
				t.Fatal(err)
			}
			if !v.OK || len(v.Failed) != 0 || len(v.Visualizations) != 0 {
				t.Fatalf("verdict %+v, want linearizable", v)
			}
			if want := len(keysOf(tc.ops)); v.Keys != want {
				t.Errorf("Keys = %d, want %d", v.Keys, want)
			}
			if files, _ := os.ReadDir(dir); len(files) != 0 {
				t.Errorf("wrote %d files for a linearizable history", len(files))
			}
		})
	}
}

func TestRejectedHistories(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
	}{
		{"two new answers: two executions", []Op{
			newOK(0, 0, 10, "exec_x", "R"), newOK(1, 20, 30, "exec_y", "R")}},
		{"two concurrent new answers", []Op{
			newOK(0, 0, 10, "exec_x", "R"), newOK(1, 5, 15, "exec_y", "R")}},
		{"replay result differs from the new answer", []Op{
			newOK(0, 0, 10, "exec_x", "R"), replay(1, 20, 30, "exec_x", "R2")}},
		{"replay results of an unanswered reservation differ", []Op{
			unknown(0, 0, fpA), replay(1, 10, 20, "exec_x", "R"), replay(2, 30, 40, "exec_x", "R2")}},
		{"replay with another execution id", []Op{
			newOK(0, 0, 10, "exec_x", "R"), replay(1, 20, 30, "exec_y", "R")}},
		{"replay returned before the new call began", []Op{
			replay(1, 0, 5, "exec_x", "R"), newOK(0, 10, 20, "exec_x", "R")}},
		{"replay of another fingerprint's result", []Op{
			newOK(0, 0, 10, "exec_x", "R"), func() Op { op := replay(1, 20, 30, "exec_x", "R"); op.Fingerprint = fpB; return op }()}},
		{"uncertain for another fingerprint's reservation", []Op{
			newOK(0, 0, 100, "exec_x", "R"), func() Op { op := uncertain(1, 10, 20, "running", "exec_x"); op.Fingerprint = fpB; return op }()}},
		{"conflict with the same fingerprint", []Op{
			newOK(0, 0, 10, "exec_x", "R"), conflict(1, 20, 30, fpA, "exec_x")}},
		{"conflict without a reservation", []Op{
			conflict(1, 20, 30, fpB, "exec_x")}},
		{"uncertain running after a replay returned", []Op{
			unknown(0, 0, fpA), replay(1, 10, 20, "exec_x", "R"), uncertain(2, 30, 40, "running", "exec_x")}},
		{"replay when the only reservation was unavailable", []Op{
			unavailable(0, 0, 10, fpA), replay(1, 20, 30, "exec_x", "R")}},
		{"stale read: uncertain running after the new answer returned", []Op{
			newOK(0, 0, 10, "exec_x", "R"), uncertain(1, 20, 30, "running", "exec_x")}},
		{"stale read: uncertain interrupted after the new answer returned", []Op{
			newOK(0, 0, 10, "exec_x", "R"), uncertain(1, 20, 30, "interrupted", "exec_x")}},
		{"running again after interrupted", []Op{
			unknown(0, 0, fpA), uncertain(1, 10, 20, "interrupted", "exec_x"), uncertain(2, 30, 40, "running", "exec_x")}},
		{"an answered execution released by a probe: run twice", []Op{
			newOK(0, 0, 100, "exec_x", "R"), uncertain(1, 10, 20, "interrupted", "exec_x"), newOK(2, 200, 210, "exec_y", "S")}},
		{"a replay of the released execution", []Op{
			unknown(0, 0, fpA), uncertain(1, 10, 20, "interrupted", "exec_x"),
			newOK(2, 30, 40, "exec_y", "R"), replay(3, 50, 60, "exec_x", "R")}},
		{"the call itself answered running", []Op{
			uncertain(0, 0, 10, "running", "exec_x")}},
		{"a lost answer after another call's reservation returned", []Op{
			newOK(0, 0, 10, "exec_x", "R"), uncertain(1, 20, 30, "interrupted", "exec_y")}},
		{"running after the lost answer returned", []Op{
			uncertain(0, 0, 10, "interrupted", "exec_x"), uncertain(1, 20, 30, "running", "exec_x")}},
		{"one bad identity among good ones", []Op{
			withKey(newOK(0, 0, 10, "exec_a", "R"), "good"), withKey(replay(1, 20, 30, "exec_a", "R"), "good"),
			newOK(0, 0, 10, "exec_x", "R"), replay(1, 20, 30, "exec_x", "R2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			v, err := CheckHistory(tc.ops, dir, timeout)
			if err != nil {
				t.Fatal(err)
			}
			if v.OK || !slices.Equal(v.Failed, []string{key}) {
				t.Fatalf("verdict %+v, want only %q to fail", v, key)
			}
			if len(v.Visualizations) != 1 {
				t.Fatalf("visualisations %q, want one", v.Visualizations)
			}
			path := v.Visualizations[0]
			if filepath.Dir(path) != dir || !strings.HasPrefix(filepath.Base(path), "linearizability-p_s_order_7f3-") ||
				!strings.HasSuffix(path, ".html") {
				t.Errorf("visualisation path %q", path)
			}
			if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), "<html") {
				t.Errorf("visualisation %q: %v, %d bytes", path, err, len(b))
			}
		})
	}
}

func TestInvalidOps(t *testing.T) {
	for _, op := range []Op{
		{Key: "k", Kind: KindOK, Status: "running"},
		{Key: "k", Kind: KindUncertain, Status: "completed"},
		{Key: "k", Kind: Kind(42)},
		{Key: "k", Kind: KindConflict, Call: 10, Return: 5},
	} {
		if _, err := CheckHistory([]Op{op}, t.TempDir(), timeout); err == nil {
			t.Errorf("CheckHistory(%+v) gave no error", op)
		}
	}
}

func TestSanitise(t *testing.T) {
	if got := sanitise("order-7f3.v2_x"); got != "order-7f3.v2_x" {
		t.Errorf("plain key became %q", got)
	}
	a, b := sanitise("a/b"), sanitise("a:b")
	if a == b || !strings.HasPrefix(a, "a_b-") || !strings.HasPrefix(b, "a_b-") {
		t.Errorf("sanitised %q and %q", a, b)
	}
	if long := sanitise(strings.Repeat("x", 300)); len(long) != 64+9 {
		t.Errorf("long key became %d bytes", len(long))
	}
}

func keysOf(ops []Op) map[string]bool {
	keys := make(map[string]bool)
	for _, op := range ops {
		keys[op.Key] = true
	}
	return keys
}
