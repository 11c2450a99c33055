package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store"
)

// bigResult is a completed result with about size bytes of data, distinct
// per i, spaced and with characters encoding/json escapes, as a tool may
// hand them to a store.
func bigResult(executionID string, i, size int) store.Result {
	data := fmt.Sprintf(`{ "i": %d, "html": "<b> & </b>", "s": %q }`, i, strings.Repeat(string(rune('a'+i%26)), size))
	return store.Result{ExecutionID: executionID, Status: store.StatusCompleted, Data: []byte(data),
		FinishedAt: time.Date(2026, 11, 30, 10, 0, 1, 0, time.UTC)}
}

// completeUntilRecorded completes as the runtime does: an unavailable
// store or an unknown outcome is tried again, and a state error naming
// this execution means an earlier try was recorded.
func completeUntilRecorded(ctx context.Context, st store.Store, k store.Key, res store.Result) (store.Record, error) {
	for {
		rec, err := st.Complete(ctx, k, "fp", res)
		var se *store.StateError
		switch {
		case err == nil:
			return rec, nil
		case errors.As(err, &se) && se.Record.ExecutionID == res.ExecutionID:
			return se.Record, nil
		case !isUnavailable(err) || errors.Is(err, store.ErrInvalid) || ctx.Err() != nil:
			return rec, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Concurrent completions of large results on a follower all commit, in
// batches the forwarder bounds by bytes (these make two), and each
// returns the record the leader holds, byte for byte, though its answer
// left the result out. (The burst past the leader's old 64 MiB body limit
// is TestProcessBurstOfLargeResults, on binaries without the race
// detector; under it, the JSON of so many MiB on two cores starves the
// Raft and gossip timers of an in-process cluster.)
func TestFollowerCompletesLargeResults(t *testing.T) {
	// Not parallel: megabytes of JSON under the race detector; lost its leader on a loaded machine.
	const (
		calls = 5
		size  = 1000 << 10
	)
	c := newCluster(t, 3, func(cfg *cluster.Config) { cfg.LeaderWait = 20 * time.Second })
	f := c.followers()[0]
	st := f.Store()
	recs := make([]store.Record, calls)
	for i := range calls {
		recs[i] = mustReserve(t, st, key(fmt.Sprint("big-", i)), exec(f.ID()), store.Reserved)
	}
	// Every completion is queued at once, as tools finishing together
	// queue theirs.
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, calls)
	got := make([]store.Record, calls)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got[i], errs[i] = completeUntilRecorded(ctx, st, key(fmt.Sprint("big-", i)), bigResult(recs[i].ExecutionID, i, size))
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("complete %d: %v", i, err)
		}
	}
	leader := c.leader()
	for i := range calls {
		rec, err := leader.Store().Lookup(t.Context(), key(fmt.Sprint("big-", i)))
		if err != nil || rec.Status != store.StatusCompleted || !bytes.Equal(rec.Data, got[i].Data) || rec.Error != nil {
			t.Fatalf("record %d: the leader holds %s with %d bytes (%v), the follower returned %s with %d",
				i, rec.Status, len(rec.Data), err, got[i].Status, len(got[i].Data))
		}
		if !bytes.Contains(rec.Data, []byte(`"html":"\u003cb\u003e \u0026 \u003c/b\u003e"`)) {
			t.Fatalf("record %d: data %.80s…, not as the log holds it", i, rec.Data)
		}
	}
}
