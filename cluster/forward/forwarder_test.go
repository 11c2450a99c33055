package forward

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/store"
)

// forwardTo forwards one command through a fresh forwarder to a leader
// that answers its batch with res over the forward stream, and returns
// the command's error.
func forwardTo(t *testing.T, res peer.Result) error {
	t.Helper()
	fl := newFakeLeader(t, func(seq uint64, _ [][]byte, w io.Writer) bool {
		return writeAnswer(w, seq, res)
	})
	_, err := forwardOne(t, newTestForwarder(t), fl.addr, "c", 5*time.Second)
	return err
}

// A leader that no longer leads answered that nothing was applied: the
// error says so, and is no unknown outcome. (A leader that refuses this
// node as a member: the cluster package's TestStreamRefusedAsMember.)
func TestBatchNotAppliedStaysNotApplied(t *testing.T) {
	err := forwardTo(t, peer.Result{Error: peer.Error{State: peer.StateNotLeader}})
	if !errors.Is(err, peer.ErrNotLeader) || errors.Is(err, store.ErrCommitUnknown) {
		t.Errorf("not the leader: %v", err)
	}
}

// Each command's own error is rebuilt as the same store error on the
// follower, from the error code or the state the leader wrote;
// "commit_unknown" matches nothing else.
func TestForwardedErrorsKeepTheirMeaning(t *testing.T) {
	cases := []struct {
		result string
		is     error
		not    []error
		msg    string
	}{
		{`{"code":"INVALID_REQUEST","message":"empty command"}`, store.ErrInvalid, []error{store.ErrCommitUnknown}, "empty command"},
		{`{"code":"UNAVAILABLE","message":"raft is overloaded"}`, store.ErrUnavailable, []error{store.ErrCommitUnknown}, "raft is overloaded"},
		{`{"state":"commit_unknown","message":"leadership lost"}`, store.ErrCommitUnknown,
			[]error{store.ErrUnavailable, store.ErrInvalid}, "leadership lost"},
		{`{"state":"from_the_future","message":"m"}`, store.ErrCommitUnknown, []error{store.ErrInvalid}, "m"},
		{`{"code":"NOT_FOUND","message":"no member"}`, store.ErrNotFound, nil, "no member"},
	}
	for _, tc := range cases {
		var res peer.Result
		if err := json.Unmarshal([]byte(tc.result), &res); err != nil {
			t.Fatal(err)
		}
		err := forwardTo(t, res)
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v saying %q", tc.result, err, tc.is, tc.msg)
		}
		for _, n := range tc.not {
			if errors.Is(err, n) {
				t.Errorf("%s: %v matches %v too", tc.result, err, n)
			}
		}
	}
	// A code no store error carries keeps its code.
	err := forwardTo(t, peer.Result{Error: peer.Error{Code: store.CodeRateLimited, Message: "slow down"}})
	if store.CodeOf(err) != store.CodeRateLimited || err.Error() != "slow down" {
		t.Errorf("unknown code: %v (%q)", err, store.CodeOf(err))
	}
}

func items(sizes ...int) []*item {
	q := make([]*item, len(sizes))
	for i, n := range sizes {
		q[i] = &item{data: make([]byte, n)}
	}
	return q
}

// A batch stops at MaxBatch commands or MaxBatchBytes of them, whichever
// comes first; a command over MaxBatchBytes goes alone.
func TestBatchBounds(t *testing.T) {
	const mib = 1 << 20
	many := make([]int, MaxBatch+10)
	for i := range many {
		many[i] = 300
	}
	cases := []struct {
		name  string
		sizes []int
		want  int
	}{
		{"one", []int{10}, 1},
		{"count", many, MaxBatch},
		{"bytes", []int{mib, mib, mib, mib, mib}, 4},
		{"just fits", []int{MaxBatchBytes - 10, 10, 1}, 2},
		{"large alone", []int{MaxBatchBytes + 1, 1}, 1},
		{"large after small", []int{1, MaxBatchBytes, 1}, 1},
		{"largest alone", []int{peer.MaxCommandBytes, 1}, 1},
	}
	for _, tc := range cases {
		if got := batchLen(items(tc.sizes...)); got != tc.want {
			t.Errorf("%s: batch of %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The leader's frame limit holds the largest batch a forwarder builds:
// the largest single command, or a batch of commands that fit
// MaxBatchBytes together, envelope included.
func TestLargestBatchFitsTheLeadersLimit(t *testing.T) {
	small := make([]int, MaxBatch)
	for i := range small {
		small[i] = MaxBatchBytes / MaxBatch
	}
	for name, sizes := range map[string][]int{
		"one command at peer.MaxCommandBytes": {peer.MaxCommandBytes, 1},
		"MaxBatch commands":                   small,
		"two halves":                          {MaxBatchBytes / 2, MaxBatchBytes / 2, 1},
	} {
		q := items(sizes...)
		n := batchLen(q)
		for _, it := range q[:n] {
			it.omitResult = true
		}
		if size := len(appendBatchFrame(nil, 1<<40, q[:n])) - 4; size > MaxBatchFrame {
			t.Errorf("%s: a frame of %d bytes, over the leader's limit of %d", name, size, MaxBatchFrame)
		}
	}
}

// A batch takes one in-flight slot per started MiB of its commands, at
// least one and at most all of them.
func TestBatchSlots(t *testing.T) {
	cases := []struct {
		sizes []int
		want  int
	}{
		{[]int{100, 200}, 1},
		{[]int{1 << 20}, 1},
		{[]int{1 << 20, 1}, 2},
		{[]int{3 << 20, 1 << 19}, 4},
		{[]int{64 << 20}, MaxInFlight},
		{nil, 1},
	}
	for _, tc := range cases {
		if got := batchSlots(items(tc.sizes...)); got != tc.want {
			t.Errorf("batchSlots(%v) = %d, want %d", tc.sizes, got, tc.want)
		}
	}
}
