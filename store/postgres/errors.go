package postgres

import (
	"errors"
	"fmt"
	"log/slog"

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
// The cause stays in the chain, so errors.As finds the *pgconn.PgError and
// errors.Is finds context.Canceled; but not in the text, which reaches a
// tenant's answer (see dbError).

// notApplied wraps an error of a write that did not reach its commit.
func notApplied(op string, err error) error {
	return dbFailure(op+": "+store.ErrUnavailable.Error()+" (not applied)", store.ErrUnavailable, err)
}

// readErr wraps an error of a read.
func readErr(op string, err error) error {
	return dbFailure(op+": "+store.ErrUnavailable.Error(), store.ErrUnavailable, err)
}

// atCommit wraps an error of the statement that commits a write.
func atCommit(op string, err error) error {
	if surelyNotCommitted(err) {
		return notApplied(op, err)
	}
	return dbFailure(op+": "+store.ErrCommitUnknown.Error(), store.ErrCommitUnknown, err)
}

// dbError is a failure of the database as the store answers it. Its text
// names the operation and the answer ("reserve: the store is unavailable
// (not applied)"), never the cause: pgx's messages name the database's
// user, name and address ("failed to connect to `user=carmy
// database=orders`: /run/postgresql/.s.PGSQL.5432 …"), which a tenant must
// not see. The cause is in the chain (Unwrap) and in Detail, for the
// node's log (store.DetailOf; slog logs Detail too).
type dbError struct {
	text   string
	answer error // store.ErrUnavailable or store.ErrCommitUnknown
	cause  error
}

// dbFailure returns a *dbError saying text, matching answer and cause.
func dbFailure(text string, answer, cause error) error {
	return &dbError{text: text, answer: answer, cause: cause}
}

func (e *dbError) Error() string { return e.text }

// Detail is the error's text with its cause, for the node's log.
func (e *dbError) Detail() string { return "postgres: " + e.text + ": " + e.cause.Error() }

// LogValue makes slog log Detail.
func (e *dbError) LogValue() slog.Value { return slog.StringValue(e.Detail()) }

// Unwrap returns the answer (store.ErrUnavailable or
// store.ErrCommitUnknown) and the cause.
func (e *dbError) Unwrap() []error { return []error{e.answer, e.cause} }

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
