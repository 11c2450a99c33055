package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/carmyhq/carmy/store"
)

// The store sorts every failure of a write into one of three answers, by
// where it happened (see the package documentation):
//
//   - before the commit was sent (connecting, BEGIN, a statement of an
//     explicit transaction): the write was not applied; notApplied makes it
//     store.ErrUnavailable.
//   - at the commit (COMMIT, or the single statement of a write that
//     commits on its own): atCommit makes it store.ErrUnavailable when the
//     server surely did not commit (nothing was sent; or the server answered
//     with an ERROR, which aborts the transaction), and
//     store.ErrCommitUnknown otherwise: the connection was lost, the
//     context ended, or the server sent FATAL while the commit was in
//     flight.
//   - a read that fails is store.ErrUnavailable: it changed nothing.
//
// The cause stays in the chain (%w), so errors.As finds the *pgconn.PgError
// and errors.Is finds context.Canceled.

// notApplied wraps an error of a write that did not reach its commit.
func notApplied(op string, err error) error {
	return fmt.Errorf("postgres: %s: %w (not applied: %w)", op, store.ErrUnavailable, err)
}

// readErr wraps an error of a read.
func readErr(op string, err error) error {
	return fmt.Errorf("postgres: %s: %w: %w", op, store.ErrUnavailable, err)
}

// atCommit wraps an error of the statement that commits a write.
func atCommit(op string, err error) error {
	if surelyNotCommitted(err) {
		return fmt.Errorf("postgres: %s: %w (not applied: %w)", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("postgres: %s: %w: %w", op, store.ErrCommitUnknown, err)
}

// surelyNotCommitted reports whether err, returned by a committing
// statement, proves that the server did not commit: nothing was sent, the
// server rolled the transaction back, or it refused the statement with an
// ERROR (which aborts its transaction). A FATAL or PANIC is not proof: a
// server shutting down may report one after the commit record is written.
//
// pgconn.SafeToRetry is trusted except for pgconn.ErrConnClosed: pgx
// v5.12.0 reports a connection lost while it waits for the answer to a
// simple-protocol statement (COMMIT) as "conn closed", which claims
// SafeToRetry although the statement was sent (MultiResultReader.NextResult
// ignores the read error, closes the connection, and its next receive
// fails on the closed connection). TestReserveCommitReplyLost catches it.
func surelyNotCommitted(err error) bool {
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return true
	}
	if pgconn.SafeToRetry(err) {
		return !errors.Is(err, pgconn.ErrConnClosed)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	severity := pe.SeverityUnlocalized // "" before PostgreSQL 9.6
	if severity == "" {
		severity = pe.Severity
	}
	return severity == "ERROR"
}

// invalidf returns an error matching store.ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{store.ErrInvalid}, args...)...)
}
