package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/carmyhq/carmy/store"
)

// TestAtCommit checks how an error of a committing statement is sorted:
// not applied only on proof, unknown otherwise, never both.
func TestAtCommit(t *testing.T) {
	cases := []struct {
		name    string
		err     error
		unknown bool
	}{
		{"server ERROR", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "40001"}, false},
		{"localised ERROR", &pgconn.PgError{Severity: "FEHLER", SeverityUnlocalized: "ERROR", Code: "23505"}, false},
		{"commit became rollback", fmt.Errorf("x: %w", pgx.ErrTxCommitRollback), false},
		{"server FATAL", &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}, true},
		{"server PANIC", &pgconn.PgError{Severity: "PANIC", SeverityUnlocalized: "PANIC", Code: "XX000"}, true},
		{"connection lost", io.ErrUnexpectedEOF, true},
		{"context ended in flight", context.DeadlineExceeded, true},
		{"conn closed (pgx's SafeToRetry after a lost reply)", connClosed{}, true},
		{"nothing sent", safeToRetry{}, false},
	}
	for _, c := range cases {
		err := atCommit("op", c.err)
		unknown, unavailable := errors.Is(err, store.ErrCommitUnknown), errors.Is(err, store.ErrUnavailable)
		if unknown == unavailable || unknown != c.unknown {
			t.Errorf("%s: %v (unknown %v, unavailable %v); want unknown %v", c.name, err, unknown, unavailable, c.unknown)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%s: %v does not wrap its cause", c.name, err)
		}
	}
}

// connClosed stands for pgconn's unexported "conn closed" error: it
// matches pgconn.ErrConnClosed and claims SafeToRetry. (The real one, after
// a lost reply, is TestReserveCommitReplyLost's.)
type connClosed struct{}

func (connClosed) Error() string     { return "conn closed" }
func (connClosed) SafeToRetry() bool { return true }
func (connClosed) Unwrap() error     { return pgconn.ErrConnClosed }

// safeToRetry stands for an error pgconn raises before sending anything.
type safeToRetry struct{}

func (safeToRetry) Error() string     { return "write failed: nothing written" }
func (safeToRetry) SafeToRetry() bool { return true }
