package cluster

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// forwardTo forwards one command through a fresh forwarder to a leader
// that answers its batch with res over the forward stream, and returns
// the command's error.
func forwardTo(t *testing.T, res applyResult) error {
	t.Helper()
	fl := newFakeLeader(t, func(seq uint64, _ [][]byte, w io.Writer) bool {
		return writeAnswer(w, seq, res)
	})
	_, err := forwardOne(t, newTestForwarder(t), fl.addr, "c", 5*time.Second)
	return err
}

// Answers that say nothing was applied stay so: the leader refusing this
// node as a member, or a leader that no longer leads.
func TestBatchNotAppliedStaysNotApplied(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeInternalError(w, http.StatusForbidden, codedWireError(store.CodeForbidden, "missing or wrong cluster key"))
	}))
	defer srv.Close()
	_, err := forwardOne(t, newTestForwarder(t), srv.Listener.Addr().String(), "c", 5*time.Second)
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrCommitUnknown) || !strings.Contains(err.Error(), "wrong cluster key") {
		t.Errorf("refused as a member: %v, want ErrUnavailable alone", err)
	}
	err = forwardTo(t, applyResult{wireError: wireError{State: stateNotLeader}})
	if !errors.Is(err, errNotLeader) || errors.Is(err, store.ErrCommitUnknown) {
		t.Errorf("not the leader: %v", err)
	}
}

// Each command's own error is rebuilt as the same store error on the
// follower, from the SPEC code or the state the leader wrote;
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
		var res applyResult
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
	err := forwardTo(t, applyResult{wireError: wireError{Code: store.CodeRateLimited, Message: "slow down"}})
	if store.CodeOf(err) != store.CodeRateLimited || err.Error() != "slow down" {
		t.Errorf("unknown code: %v (%q)", err, store.CodeOf(err))
	}
}

func items(sizes ...int) []*fwdItem {
	q := make([]*fwdItem, len(sizes))
	for i, n := range sizes {
		q[i] = &fwdItem{data: make([]byte, n)}
	}
	return q
}

// A batch stops at maxBatch commands or maxBatchBytes of them, whichever
// comes first; a command over maxBatchBytes goes alone.
func TestBatchBounds(t *testing.T) {
	const mib = 1 << 20
	many := make([]int, maxBatch+10)
	for i := range many {
		many[i] = 300
	}
	cases := []struct {
		name  string
		sizes []int
		want  int
	}{
		{"one", []int{10}, 1},
		{"count", many, maxBatch},
		{"bytes", []int{mib, mib, mib, mib, mib}, 4},
		{"just fits", []int{maxBatchBytes - 10, 10, 1}, 2},
		{"large alone", []int{maxBatchBytes + 1, 1}, 1},
		{"large after small", []int{1, maxBatchBytes, 1}, 1},
		{"largest alone", []int{maxCommandBytes, 1}, 1},
	}
	for _, tc := range cases {
		if got := batchLen(items(tc.sizes...)); got != tc.want {
			t.Errorf("%s: batch of %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The leader's frame limit holds the largest batch a forwarder builds:
// the largest single command, or a batch of commands that fit
// maxBatchBytes together, envelope included.
func TestLargestBatchFitsTheLeadersLimit(t *testing.T) {
	small := make([]int, maxBatch)
	for i := range small {
		small[i] = maxBatchBytes / maxBatch
	}
	for name, sizes := range map[string][]int{
		"one command at maxCommandBytes": {maxCommandBytes, 1},
		"maxBatch commands":              small,
		"two halves":                     {maxBatchBytes / 2, maxBatchBytes / 2, 1},
	} {
		q := items(sizes...)
		n := batchLen(q)
		for _, it := range q[:n] {
			it.omitResult = true
		}
		if size := len(appendBatchFrame(nil, 1<<40, q[:n])) - 4; size > maxBatchFrame {
			t.Errorf("%s: a frame of %d bytes, over the leader's limit of %d", name, size, maxBatchFrame)
		}
	}
}

// A command over maxCommandBytes is refused before it is proposed or
// forwarded, on any node alike: no leader could take it.
func TestCommandOverTheLimitIsRefused(t *testing.T) {
	if err := checkSize(fsm.TypeComplete, make([]byte, maxCommandBytes)); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	err := checkSize(fsm.TypeComplete, make([]byte, maxCommandBytes+1))
	if !errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrCommitUnknown) || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("err = %v, want ErrInvalid: over the limit", err)
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
		{[]int{64 << 20}, maxInFlight},
		{nil, 1},
	}
	for _, tc := range cases {
		if got := batchSlots(items(tc.sizes...)); got != tc.want {
			t.Errorf("batchSlots(%v) = %d, want %d", tc.sizes, got, tc.want)
		}
	}
}
