package postgres

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// catchUpMargin is how far before a lost listening connection the fleet
// looks for cancellations it may have missed: it covers the nodes'
// clocks (a cancellation's finish time is stamped by the node that asked
// for it).
const catchUpMargin = time.Minute

// listenCheck is how often the listening connection is checked (a query)
// and, when another node holds it, the prober lock tried.
const listenCheck = 2 * time.Second

// listenLoop keeps a connection of its own that listens for cancellations
// and holds the prober lock when it can, until ctx ends.
func (f *Fleet) listenLoop(ctx context.Context) {
	since := f.started
	for attempt := 0; ctx.Err() == nil; attempt++ {
		lost := f.listen(ctx, since)
		if ctx.Err() != nil {
			return
		}
		if !lost.IsZero() {
			since, attempt = lost, 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryPause(attempt)):
		}
	}
}

// listen connects, listens, catches up with the cancellations since
// since (less catchUpMargin), and then delivers each notification until
// the connection fails or ctx ends. It returns when the connection was
// lost (zero when it never listened).
func (f *Fleet) listen(ctx context.Context, since time.Time) (lost time.Time) {
	s := f.st.Load()
	cctx, cancel := context.WithTimeout(ctx, f.beatTimeout())
	conn, err := pgx.ConnectConfig(cctx, f.pool.Config().ConnConfig)
	if err == nil {
		_, err = conn.Exec(cctx, "LISTEN "+pgx.Identifier{s.names.cancelChannel()}.Sanitize())
	}
	cancel()
	if err != nil {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
		return time.Time{}
	}
	defer func() {
		f.prober.Store(false)
		_ = conn.Close(context.Background())
	}()
	if err := f.catchUp(ctx, conn, since.Add(-catchUpMargin)); err != nil {
		return time.Now()
	}
	nextCheck := time.Now()
	for {
		if time.Now().After(nextCheck) {
			if err := f.checkListener(ctx, conn, s); err != nil {
				if ctx.Err() == nil {
					f.log.Debug("the listening connection was lost", slog.Any("err", err))
				}
				return time.Now()
			}
			nextCheck = time.Now().Add(listenCheck)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Until(nextCheck))
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			f.cancelled(n.Payload)
		case ctx.Err() != nil:
			return time.Now()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Time for a check.
		default:
			return time.Now()
		}
	}
}

// checkListener proves the connection alive and, unless this node holds
// it already, tries the prober lock.
func (f *Fleet) checkListener(ctx context.Context, conn *pgx.Conn, s *Store) error {
	cctx, cancel := context.WithTimeout(ctx, f.beatTimeout())
	defer cancel()
	if f.prober.Load() {
		_, err := conn.Exec(cctx, "SELECT 1")
		return err
	}
	var got bool
	if err := conn.QueryRow(cctx, "SELECT pg_try_advisory_lock($1)", s.names.proberKey()).Scan(&got); err != nil {
		return err
	}
	if got {
		f.prober.Store(true)
		f.log.Info("this node runs the fleet's reconcile probes")
	}
	return nil
}

// catchUp delivers the cancellations of this node's executions recorded
// since since.
func (f *Fleet) catchUp(ctx context.Context, conn *pgx.Conn, since time.Time) error {
	s := f.st.Load()
	cctx, cancel := context.WithTimeout(ctx, f.beatTimeout())
	defer cancel()
	rows, err := conn.Query(cctx, s.fq.cancelledSince, f.cfg.NodeID, since)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, id := range ids {
		f.cancelled(id)
	}
	return nil
}

// cancelled tells OnCancel's function.
func (f *Fleet) cancelled(executionID string) {
	f.mu.Lock()
	fn := f.onCancel
	f.mu.Unlock()
	if fn != nil {
		fn(executionID)
	}
}
