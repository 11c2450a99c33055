package api

import (
	"math"
	"net/http"
	"net/http/pprof"
	rpprof "runtime/pprof"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/internal/tracing"
	"github.com/carmyhq/carmy/store"
)

// Outcomes of a call, the outcome label of carmy_calls_total and
// carmy_call_duration_seconds, whose transport label says how the call
// came (TransportHTTP, TransportMCP).
const (
	OutcomeRan         = "ran"          // the tool ran now (200)
	OutcomeReplayed    = "replayed"     // a recorded outcome was replayed (200)
	OutcomePassthrough = "passthrough"  // a read-only tool ran now, nothing reserved or recorded (200)
	OutcomeAwaiting    = "awaiting"     // a gated call awaits a decision (202)
	OutcomeConflict    = "conflict"     // IDEMPOTENCY_CONFLICT
	OutcomeUncertain   = "uncertain"    // EXECUTION_UNCERTAIN
	OutcomeCapacity    = "capacity"     // IDEMPOTENCY_CAPACITY
	OutcomeUnavailable = "unavailable"  // UNAVAILABLE
	OutcomeInvalid     = "invalid"      // the request itself was at fault (400, 404, 413, 415)
	OutcomeDenied      = "denied"       // UNAUTHORIZED or FORBIDDEN
	OutcomeLimited     = "rate_limited" // RATE_LIMITED
	OutcomeError       = "error"        // INTERNAL
)

// outcomeKey is where handleError leaves a failed call's outcome.
const outcomeKey = "carmy.outcome"

// outcomeOfCode maps an error code to a call outcome.
func outcomeOfCode(code string) string {
	switch code {
	case store.CodeConflict:
		return OutcomeConflict
	case store.CodeUncertain:
		return OutcomeUncertain
	case store.CodeCapacity:
		return OutcomeCapacity
	case store.CodeUnavailable:
		return OutcomeUnavailable
	case store.CodeUnauthorized, store.CodeForbidden:
		return OutcomeDenied
	case store.CodeRateLimited:
		return OutcomeLimited
	case store.CodeInternal:
		return OutcomeError
	}
	return OutcomeInvalid
}

// meterCalls is the outermost middleware of the call route: it answers an
// error through the error handler itself, so that the outcome the handler
// chose is known, and counts every answer.
func (s *Server) meterCalls(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		line := &callLine{}
		c.Set(callLineKey, line)
		r := c.Request()
		ctx, span := tracing.StartCallHTTP(r.Context(), r.Header)
		if span.IsRecording() {
			c.SetRequest(r.WithContext(ctx))
		}
		if err := next(c); err != nil {
			s.echo.HTTPErrorHandler(err, c)
		}
		took := time.Since(start)
		outcome, _ := c.Get(outcomeKey).(string)
		s.countCall(TransportHTTP, outcome, took)
		s.logCall(c, line, outcome, took)
		if span.IsRecording() {
			traceCall(span, httpCallEntry(c, line, outcome))
		}
		span.End()
		return nil
	}
}

// countCall tells Metrics of one call of a transport (carmy_calls_total
// and carmy_call_duration_seconds), and counts it in the node's activity:
// the one place both transports' calls are counted. An unknown outcome
// counts as an error.
func (s *Server) countCall(transport, outcome string, took time.Duration) {
	metered := outcome
	if !slices.Contains(callOutcomes, metered) {
		metered = OutcomeError
	}
	s.metrics.CallAnswered(transport, metered, took)
	s.activity.record(outcome)
}

// metricsRoutes serves GET /metrics with h when Metrics gives one: open,
// like /healthz, unless Auth.MetricsToken is set.
func (s *Server) metricsRoutes(h http.Handler) {
	if h == nil {
		return
	}
	s.echo.GET("/metrics", echo.WrapHandler(h), s.auth.authenticateMetrics)
}

// pprofRoutes serves the pprof profiles under /debug/pprof/ (admin token
// when auth is on), when Config.Pprof asks for them.
func (s *Server) pprofRoutes() {
	e := s.echo
	admin := []echo.MiddlewareFunc{s.auth.authenticate, requireAdmin}
	e.GET("/debug/pprof/", echo.WrapHandler(http.HandlerFunc(pprof.Index)), admin...)
	e.GET("/debug/pprof/cmdline", echo.WrapHandler(http.HandlerFunc(pprof.Cmdline)), admin...)
	e.GET("/debug/pprof/profile", echo.WrapHandler(http.HandlerFunc(pprof.Profile)), append(admin, pprofSeconds(true, 30*time.Second))...)
	e.GET("/debug/pprof/symbol", echo.WrapHandler(http.HandlerFunc(pprof.Symbol)), admin...)
	e.GET("/debug/pprof/trace", echo.WrapHandler(http.HandlerFunc(pprof.Trace)), append(admin, pprofSeconds(false, time.Second))...)
	// The named profiles: heap, goroutine, allocs, block, mutex, threadcreate.
	e.GET("/debug/pprof/:name", func(c echo.Context) error {
		name := c.Param("name")
		if rpprof.Lookup(name) == nil {
			return newError(store.CodeNotFound, "no profile named "+strconv.Quote(name))
		}
		pprof.Handler(name).ServeHTTP(c.Response(), c.Request())
		return nil
	}, append(admin, pprofSeconds(true, 0))...)
}

// maxStreamSeconds caps the time a profile's answer is given on top of
// the write bound: a day.
const maxStreamSeconds = 24 * 60 * 60

// pprofSeconds refuses a seconds parameter that is not a positive number
// (a whole one when whole) with the error envelope, before pprof answers
// it in plain text. The profile is collected for that many seconds
// (byDefault without the parameter), while its answer may already be
// streaming: that time is added to the write bound (boundWrite).
func pprofSeconds(whole bool, byDefault time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			v, ok := c.Request().URL.Query()["seconds"]
			if !ok {
				c.Set(streamKey, byDefault)
				return next(c)
			}
			var secs float64
			var good bool
			if whole {
				n, err := strconv.ParseInt(v[0], 10, 64)
				secs, good = float64(n), err == nil && n > 0
			} else {
				f, err := strconv.ParseFloat(v[0], 64)
				secs, good = f, err == nil && f > 0 && !math.IsInf(f, 0)
			}
			if len(v) != 1 || !good {
				return invalidField("seconds", "seconds must be one positive number")
			}
			c.Set(streamKey, time.Duration(min(secs, maxStreamSeconds)*float64(time.Second)))
			return next(c)
		}
	}
}
