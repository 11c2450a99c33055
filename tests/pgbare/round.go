package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// maxRound bounds the writes of one round (the store's bound too).
const maxRound = 128

// write is one of a call's two writes, waiting for its round.
type write struct {
	principal, session, request string
	completed                   bool // the update (else the insert)
	done                        chan error
}

// round is one pool's rounds: one at a time, each taking every write
// queued meanwhile (up to maxRound of each kind).
type round struct {
	pool   *pgxpool.Pool
	q      queries
	node   string
	in     chan *write
	rounds atomic.Int64
}

// do queues w and waits for its round's answer.
func (r *round) do(ctx context.Context, w *write) error {
	select {
	case r.in <- w:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop runs rounds until ctx ends; an error of a round ends it.
func (r *round) loop(ctx context.Context) error {
	var ins, upd []*write
	for {
		ins, upd = ins[:0], upd[:0]
		add := func(w *write) {
			if w.completed {
				upd = append(upd, w)
			} else {
				ins = append(ins, w)
			}
		}
		select {
		case w := <-r.in:
			add(w)
		case <-ctx.Done():
			return nil
		}
	drain:
		for len(ins) < maxRound && len(upd) < maxRound {
			select {
			case w := <-r.in:
				add(w)
			default:
				break drain
			}
		}
		err := r.write(ctx, ins, upd)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: round: %w", r.node, err)
		}
		r.rounds.Add(1)
		for _, w := range ins {
			w.done <- nil
		}
		for _, w := range upd {
			w.done <- nil
		}
	}
}

// write is one round: BEGIN and the statements for its inserts and its
// updates in one pipeline, then COMMIT (two round trips, as a fleet's
// round whose leases hold what it needs).
func (r *round) write(ctx context.Context, ins, upd []*write) error {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	now := time.Now()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	if len(ins) > 0 {
		p, s, q, e, t := make([]string, len(ins)), make([]string, len(ins)), make([]string, len(ins)), make([]string, len(ins)), make([]time.Time, len(ins))
		for i, w := range ins {
			p[i], s[i], q[i], e[i], t[i] = w.principal, w.session, w.request, "x"+w.session+"-"+w.request, now
		}
		b.Queue(r.q.insert, p, s, q, e, t, r.node)
	}
	if len(upd) > 0 {
		p, s, q, t, d := make([]string, len(upd)), make([]string, len(upd)), make([]string, len(upd)), make([]time.Time, len(upd)), make([][]byte, len(upd))
		for i, w := range upd {
			p[i], s[i], q[i], t[i], d[i] = w.principal, w.session, w.request, now, []byte(`{"echo":"`+w.request+`"}`)
		}
		b.Queue(r.q.update, p, s, q, t, d)
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		// A failed statement left the transaction aborted: end it.
		if _, rerr := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
		return err
	}
	_, err = conn.Exec(ctx, "COMMIT")
	return err
}
