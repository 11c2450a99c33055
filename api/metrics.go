package api

import (
	"errors"
	"math"
	"net/http"
	"net/http/pprof"
	rpprof "runtime/pprof"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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

// apiMetrics are the instruments of the calls of both transports.
type apiMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// series holds each transport's and outcome's series, looked up once.
	series map[seriesKey]outcomeSeries
}

// seriesKey names the series of one transport and outcome.
type seriesKey struct{ transport, outcome string }

type outcomeSeries struct {
	calls    prometheus.Counter
	duration prometheus.Observer
}

// callOutcomes are the outcome label's values.
var callOutcomes = []string{OutcomeRan, OutcomeReplayed, OutcomePassthrough, OutcomeAwaiting, OutcomeConflict, OutcomeUncertain,
	OutcomeCapacity, OutcomeUnavailable, OutcomeInvalid, OutcomeDenied, OutcomeLimited, OutcomeError}

// newAPIMetrics returns the counter and the histogram of the calls of
// both transports (POST /v1/tools/call, tools/call at /mcp), by transport
// and outcome.
func newAPIMetrics(reg prometheus.Registerer) (*apiMetrics, error) {
	m := &apiMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "carmy_calls_total",
			Help: "Answers to tool calls by transport (http: POST /v1/tools/call, mcp: tools/call at /mcp) and outcome: " +
				"ran, replayed, passthrough, conflict, uncertain, capacity, unavailable, invalid, denied, rate_limited, error.",
		}, []string{"transport", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "carmy_call_duration_seconds",
			Help:    "Time to answer a tool call, by transport and outcome.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30, 60},
		}, []string{"transport", "outcome"}),
	}
	var err error
	if m.calls, err = register(reg, m.calls); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	// Every series is exported from the start, at 0, so that rates work
	// from the first scrape.
	m.series = make(map[seriesKey]outcomeSeries)
	for _, t := range []string{TransportHTTP, TransportMCP} {
		for _, o := range callOutcomes {
			m.series[seriesKey{t, o}] = outcomeSeries{calls: m.calls.WithLabelValues(t, o), duration: m.duration.WithLabelValues(t, o)}
		}
	}
	return m, nil
}

// register adds c to reg and returns it, or returns the collector of the
// same description reg holds already: a second server on one registry
// shares the first one's series.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

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

// countCall counts one call of a transport in carmy_calls_total and
// carmy_call_duration_seconds, and in the node's activity: the one place
// both transports' calls are counted. An unknown outcome counts as an
// error.
func (s *Server) countCall(transport, outcome string, took time.Duration) {
	series, ok := s.metrics.series[seriesKey{transport, outcome}]
	if !ok {
		series = s.metrics.series[seriesKey{transport, OutcomeError}]
	}
	series.calls.Inc()
	series.duration.Observe(took.Seconds())
	s.activity.record(outcome)
}

// metricsRoutes serves GET /metrics: open, like /healthz, unless
// Auth.MetricsToken is set.
func (s *Server) metricsRoutes(g prometheus.Gatherer) {
	s.echo.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:          promLogger{s},
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: false,
	})), s.auth.authenticateMetrics)
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

// promLogger logs the metrics handler's errors.
type promLogger struct{ s *Server }

func (l promLogger) Println(v ...any) { l.s.log.Warn("serving metrics", "err", v) }
