package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store"
)

// Completions join the rounds of reservations (rounds.go): a round's
// completions are one statement for all (completeAll, rounds_set.go) or,
// when that does not apply, one statement each (complete, here), after
// the round has locked the meta row. Each decides whether the outcome
// fits (store.Overflow, against the bytes as the round's earlier
// statements left them), records the outcome or the failure
// store.OverflowResult makes of it, and adds its bytes to the store's and
// the principal's. Both failures are made here
// before the round (they depend on the result, the principal and the
// bounds alone), so that the statement only chooses, and one round trip
// serves the whole round.

// completion is one Complete waiting for its round.
type completion struct {
	pending
	key         store.Key
	fingerprint string
	res         store.Result
	maxBytes    int64 // the store's bound on bytes when submitted (0: none)
	// overQuota and overStore are the errors recorded instead of the
	// outcome when it would take the principal over res.ByteQuota, or the
	// store over maxBytes (store.OverflowResult).
	overQuota, overStore []byte
	done                 chan completeResult // receives the answer; buffered
}

// completeResult is a completion's answer: the record it settled
// (applied), or nothing when the record was not open under this execution
// (the caller reads it to say why), or an error.
type completeResult struct {
	rec     store.Record
	applied bool
	err     error
}

// complete queues a completion of key with res and waits for its round's
// answer; see submit for what an ended context means.
func (r *rounds) complete(ctx context.Context, key store.Key, fingerprint string, res store.Result, maxBytes int64) (completeResult, error) {
	c := &completion{
		pending: pending{ctx: ctx, at: time.Now()}, key: key, fingerprint: fingerprint, res: res, maxBytes: maxBytes,
		overQuota: store.OverflowResult(res, key.Principal, res.ByteQuota).Error,
		overStore: store.OverflowResult(res, "", maxBytes).Error,
		done:      make(chan completeResult, 1),
	}
	r.enqueue(func() { r.settles = append(r.settles, c) })
	out, err := await(r, "complete", &c.pending, c.done, func() {
		r.settles = slices.DeleteFunc(r.settles, func(q *completion) bool { return q == c })
	})
	if err != nil {
		return completeResult{}, err
	}
	return out, out.err
}

// queueComplete adds c's statement to a round's batch.
func (s *Store) queueComplete(b *pgx.Batch, c *completion) {
	b.Queue(s.q.complete, c.key.Principal, c.key.Session, c.key.RequestID, c.fingerprint, c.res.ExecutionID,
		string(c.res.Status), []byte(c.res.Data), []byte(c.res.Error), finishedAt(c.res),
		store.OutcomeSize(c.res.Data, c.res.Error), c.res.ByteQuota, c.maxBytes, c.overQuota, c.overStore)
}

// readComplete reads the answer of a queued completion's statement.
func readComplete(br pgx.BatchResults) (completeResult, error) {
	rows, err := br.Query()
	if err != nil {
		return completeResult{}, err
	}
	recs, err := pgx.CollectRows(rows, scanRecord)
	if err != nil || len(recs) == 0 {
		return completeResult{}, err
	}
	return completeResult{rec: recs[0], applied: true}, nil
}
