package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// forwardTo forwards one command through a fresh forwarder to a leader
// that answers with h, and returns the command's error. The leader serves
// no forward stream (404, as an older build), so the batch goes as an
// HTTP request; stream_test.go tests the stream.
func forwardTo(t *testing.T, h http.HandlerFunc) error {
	t.Helper()
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == pathStream {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	defer leader.Close()
	c := newInternalClient(Config{}, nil)
	defer c.close()
	f := newForwarder(c, newNodeMetrics())
	defer f.close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := f.apply(ctx, leader.Listener.Addr().String(), []byte(`{"v":1,"type":"expire"}`), time.Now().Add(5*time.Second), false)
	return err
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// A batch the leader refuses whole was sent: whether each command was
// applied is unknown to the follower, and the refusal is no refusal of any
// command. Its error is store.ErrCommitUnknown and matches no refusal, so
// that a runtime recording an outcome keeps trying instead of taking it
// for an invalid result (which left the execution running for good).
func TestBatchRefusedWholeIsOutcomeUnknown(t *testing.T) {
	cases := map[string]http.HandlerFunc{
		// What a leader answered to a body over its limit.
		"400 invalid":          answer(http.StatusBadRequest, `{"error":"invalid","message":"http: request body too large"}`),
		"400 INVALID_REQUEST":  answer(http.StatusBadRequest, `{"code":"INVALID_REQUEST","message":"the batch cannot be read","error":"invalid"}`),
		"413 without a body":   answer(http.StatusRequestEntityTooLarge, ``),
		"409 conflict":         answer(http.StatusConflict, `{"error":"conflict","message":"no"}`),
		"404 not found":        answer(http.StatusNotFound, `{"error":"not_found","message":"no"}`),
		"500 without a body":   answer(http.StatusInternalServerError, ``),
		"200 unreadable":       answer(http.StatusOK, `{"results":[`),
		"200 too few results":  answer(http.StatusOK, `{"results":[]}`),
		"200 without response": answer(http.StatusOK, `{"results":[{}]}`),
	}
	refusals := []error{store.ErrInvalid, store.ErrConflict, store.ErrNotFound, store.ErrInvalidState,
		store.ErrCapacity, store.ErrUncertain, store.ErrUnavailable}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			err := forwardTo(t, h)
			if !errors.Is(err, store.ErrCommitUnknown) {
				t.Fatalf("err = %v, want store.ErrCommitUnknown", err)
			}
			for _, r := range refusals {
				if errors.Is(err, r) {
					t.Errorf("err = %v matches %v too", err, r)
				}
			}
			if store.CodeOf(err) != store.CodeUnavailable {
				t.Errorf("code %q, want %s", store.CodeOf(err), store.CodeUnavailable)
			}
		})
	}
}

// Answers that say nothing was applied stay so: the leader refusing this
// node as a member, or a leader that no longer leads.
func TestBatchNotAppliedStaysNotApplied(t *testing.T) {
	err := forwardTo(t, answer(http.StatusForbidden, `{"error":"forbidden","message":"missing or wrong cluster key"}`))
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrCommitUnknown) || !strings.Contains(err.Error(), "wrong cluster key") {
		t.Errorf("refused as a member: %v, want ErrUnavailable alone", err)
	}
	err = forwardTo(t, answer(http.StatusOK, `{"results":[{"error":"not_leader"}]}`))
	if !errors.Is(err, errNotLeader) || errors.Is(err, store.ErrCommitUnknown) {
		t.Errorf("not the leader: %v", err)
	}
}

// Each command's own error is rebuilt as the same store error on the
// follower, whether the leader wrote it as a SPEC code or, being of an
// older build, as its own token; "commit_unknown" matches nothing else.
func TestForwardedErrorsKeepTheirMeaning(t *testing.T) {
	cases := []struct {
		result string
		is     error
		not    []error
		msg    string
	}{
		{`{"code":"INVALID_REQUEST","message":"empty command","error":"invalid"}`, store.ErrInvalid, []error{store.ErrCommitUnknown}, "empty command"},
		{`{"error":"invalid","message":"empty command"}`, store.ErrInvalid, []error{store.ErrCommitUnknown}, "empty command"},
		{`{"code":"UNAVAILABLE","message":"raft is overloaded","error":"unavailable"}`, store.ErrUnavailable, []error{store.ErrCommitUnknown}, "raft is overloaded"},
		{`{"error":"unavailable","message":"raft is overloaded"}`, store.ErrUnavailable, []error{store.ErrCommitUnknown}, "raft is overloaded"},
		{`{"state":"commit_unknown","message":"leadership lost","error":"commit_unknown"}`, store.ErrCommitUnknown,
			[]error{store.ErrUnavailable, store.ErrInvalid}, "leadership lost"},
		{`{"error":"commit_unknown","message":"leadership lost"}`, store.ErrCommitUnknown, []error{store.ErrUnavailable, store.ErrInvalid}, "leadership lost"},
		{`{"state":"from_the_future","message":"m"}`, store.ErrCommitUnknown, []error{store.ErrInvalid}, "m"},
		{`{"code":"NOT_FOUND","message":"no member","error":"not_found"}`, store.ErrNotFound, nil, "no member"},
	}
	for _, tc := range cases {
		err := forwardTo(t, answer(http.StatusOK, `{"results":[`+tc.result+`]}`))
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
	err := forwardTo(t, answer(http.StatusOK, `{"results":[{"code":"RATE_LIMITED","message":"slow down"}]}`))
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

// The leader's body limit holds the largest request a forwarder builds:
// the largest single command, or a batch of commands that fit
// maxBatchBytes together, envelope included (every command asking for its
// result to be left out: the longest list of indices).
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
		// The request's size: its envelope around one-byte commands, plus
		// the commands' bytes (a command is a compact JSON object, which
		// encoding/json copies as it is).
		for _, it := range q[:n] {
			it.data, it.omitResult = []byte("0"), true
		}
		envelope, err := json.Marshal(newApplyRequest(q[:n]))
		if err != nil {
			t.Fatal(err)
		}
		size := len(envelope) - n
		for _, s := range sizes[:n] {
			size += s
		}
		if size > maxInternalReq {
			t.Errorf("%s: a request of %d bytes, over the leader's limit of %d", name, size, maxInternalReq)
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
