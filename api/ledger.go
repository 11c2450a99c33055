package api

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// Ledger is what the server needs of the audit ledger (docs/audit.md).
type Ledger interface {
	// AuditHead returns the {seq, hash} of the last entry.
	AuditHead(ctx context.Context) (audit.Head, error)
	// AuditExport writes up to limit entries after seq after to w, as
	// NDJSON export lines, a checkpoint line first unless they start at
	// the first entry.
	AuditExport(ctx context.Context, w io.Writer, after uint64, limit int) error
}

// Bounds of a page of GET /v1/audit.
const (
	DefaultAuditLimit = 1000
	MaxAuditLimit     = 10000
)

// NDJSON is the media type of GET /v1/audit.
const NDJSON = "application/x-ndjson"

func (s *Server) ledgerRoutes() {
	auth := s.auth.authenticate
	s.echo.GET("/v1/audit", s.auditPage, auth, requireAdmin)
	s.echo.GET("/v1/audit/head", s.auditHead, auth, requireAdmin)
}

func (s *Server) auditLedger() (Ledger, error) {
	if s.ledger == nil {
		return nil, newError(store.CodeNotFound, "this node keeps no audit ledger")
	}
	return s.ledger, nil
}

func (s *Server) auditHead(c echo.Context) error {
	l, err := s.auditLedger()
	if err != nil {
		return err
	}
	if err := onlyParams(c.QueryParams()); err != nil {
		return err
	}
	h, err := l.AuditHead(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, h)
}

// auditPage answers GET /v1/audit?after=SEQ&limit=N: the entries after
// SEQ (default 0: from the first kept), at most N (default
// DefaultAuditLimit, at most MaxAuditLimit), one per line.
func (s *Server) auditPage(c echo.Context) error {
	l, err := s.auditLedger()
	if err != nil {
		return err
	}
	q := c.QueryParams()
	if err := onlyParams(q, "after", "limit"); err != nil {
		return err
	}
	after, limit := uint64(0), DefaultAuditLimit
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseUint(v, 10, 64); err != nil {
			return invalidField("after", `"after" must be a sequence number (0 or more)`)
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxAuditLimit {
			return invalidField("limit", `"limit" must be 1 to `+strconv.Itoa(MaxAuditLimit))
		}
	}
	// The page is written as it is read: a failure after the first
	// bytes cuts the answer short, which the verifier reports.
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, NDJSON)
	w.Header().Set("Cache-Control", "no-store")
	return l.AuditExport(c.Request().Context(), &lazyOK{w: w}, after, limit)
}

// lazyOK writes the 200 status with the first bytes, so that an error
// before them is still answered with its own status.
type lazyOK struct {
	w       *echo.Response
	started bool
}

func (l *lazyOK) Write(b []byte) (int, error) {
	if !l.started {
		l.started = true
		l.w.WriteHeader(http.StatusOK)
	}
	return l.w.Write(b)
}

// actorContext is the request's context naming its caller as the actor
// of what it decides, for the audit ledger.
func actorContext(c echo.Context) context.Context {
	ctx := c.Request().Context()
	if caller := callerOf(c); caller != nil {
		ctx = store.WithActor(ctx, caller.Principal)
	}
	return ctx
}
