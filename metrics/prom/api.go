package prom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/carmyhq/carmy/api"
)

// apiMetrics are the instruments of the API: the calls of both
// transports, the audited actions, the requests refused for their
// credentials.
type apiMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// series holds each transport's and outcome's series, looked up once.
	series  map[seriesKey]outcomeSeries
	audited *prometheus.CounterVec
	// authFailures and keyFailures count by result; refusals holds their
	// series by credential and result.
	authFailures, keyFailures *prometheus.CounterVec
	refusals                  map[seriesKey]prometheus.Counter
}

// seriesKey names the series of one transport (or credential) and
// outcome (or result).
type seriesKey struct{ kind, outcome string }

type outcomeSeries struct {
	calls    prometheus.Counter
	duration prometheus.Observer
}

// newAPIMetrics returns the API's instruments, every series of calls and
// refusals exported from the start, at 0, so that rates work from the
// first scrape.
func newAPIMetrics() *apiMetrics {
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
		audited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "carmy_admin_actions_total",
			Help: "Audited actions (join, remove, cancel, resolve, release, approve, deny) by outcome: ok or the error code.",
		}, []string{"action", "outcome"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "carmy_auth_failures_total",
			Help: "Requests refused for their credentials, by result: unauthorized (401: an unknown token or a malformed Authorization), rate_limited (429: the client address is over its failures per minute).",
		}, []string{"result"}),
		keyFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "carmy_cluster_key_failures_total",
			Help: "Node-to-node requests (/internal/) refused for their cluster key, by result: unauthorized (403: a wrong key), rate_limited (429: the client address is over its failures per minute).",
		}, []string{"result"}),
	}
	m.series = make(map[seriesKey]outcomeSeries)
	for _, t := range []string{api.TransportHTTP, api.TransportMCP} {
		for _, o := range api.Outcomes() {
			m.series[seriesKey{t, o}] = outcomeSeries{calls: m.calls.WithLabelValues(t, o), duration: m.duration.WithLabelValues(t, o)}
		}
	}
	m.refusals = make(map[seriesKey]prometheus.Counter)
	for cred, vec := range map[string]*prometheus.CounterVec{api.CredentialToken: m.authFailures, api.CredentialClusterKey: m.keyFailures} {
		for _, r := range []string{api.AuthUnauthorized, api.AuthRateLimited} {
			m.refusals[seriesKey{cred, r}] = vec.WithLabelValues(r)
		}
	}
	return m
}

func (m *apiMetrics) register(reg prometheus.Registerer) {
	reg.MustRegister(m.calls, m.duration, m.audited, m.authFailures, m.keyFailures)
}

// CallAnswered implements api.Metrics: carmy_calls_total and
// carmy_call_duration_seconds. An unknown transport or outcome counts as
// an error of its transport.
func (m *apiMetrics) CallAnswered(transport, outcome string, took time.Duration) {
	series, ok := m.series[seriesKey{transport, outcome}]
	if !ok {
		series, ok = m.series[seriesKey{transport, api.OutcomeError}]
	}
	if !ok {
		return
	}
	series.calls.Inc()
	series.duration.Observe(took.Seconds())
}

// Audited implements api.Metrics: carmy_admin_actions_total.
func (m *apiMetrics) Audited(action, outcome string) {
	m.audited.WithLabelValues(action, outcome).Inc()
}

// AuthRefused implements api.Metrics: carmy_auth_failures_total for
// tokens, carmy_cluster_key_failures_total for cluster keys. Anything else
// is not counted.
func (m *apiMetrics) AuthRefused(credential, result string) {
	if c, ok := m.refusals[seriesKey{credential, result}]; ok {
		c.Inc()
	}
}
