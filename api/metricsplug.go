package api

import (
	"log/slog"
	"net/http"
	"slices"
	"time"
)

// Metrics is what the server tells of its work, for metrics, and what
// serves them at GET /metrics. Package api links no metrics library:
// package metrics/prom implements Metrics with Prometheus (every metric
// of docs/operations.md#metrics), and the node (package embed) gives it;
// Config.Metrics nil counts nothing and serves no /metrics.
//
// The server calls it from many goroutines at once, on the path of
// requests: its methods must be safe for concurrent use, quick, and must
// not block.
type Metrics interface {
	// CallAnswered is told of every answered tool call of both
	// transports (POST /v1/tools/call, tools/call at /mcp): its
	// transport (TransportHTTP, TransportMCP), its outcome (one of
	// Outcomes) and the time taken to answer it.
	CallAnswered(transport, outcome string, took time.Duration)
	// Audited is told of every audited action (ActionJoin, ActionCancel,
	// …), whoever asked for it, and its outcome: "ok" or the error code.
	Audited(action, outcome string)
	// AuthRefused is told of every request refused for its credential:
	// credential CredentialToken (a token of the API) or
	// CredentialClusterKey (the cluster key at /internal/), result
	// AuthUnauthorized (a wrong credential) or AuthRateLimited (the
	// client address is over its failures per minute).
	AuthRefused(credential, result string)
	// Handler serves GET /metrics, which the server guards with
	// Auth.MetricsToken when set; it logs its own failures to log. Nil:
	// the server serves no /metrics (404).
	Handler(log *slog.Logger) http.Handler
}

// The credentials of Metrics.AuthRefused.
const (
	CredentialToken      = "token"       // a bearer token of the API
	CredentialClusterKey = "cluster_key" // the cluster key of /internal/
)

// The results of Metrics.AuthRefused.
const (
	AuthUnauthorized = "unauthorized" // 401 (a wrong cluster key: 403)
	AuthRateLimited  = "rate_limited" // 429
)

// callOutcomes are the outcomes of a call.
var callOutcomes = []string{OutcomeRan, OutcomeReplayed, OutcomePassthrough, OutcomeAwaiting, OutcomeConflict, OutcomeUncertain,
	OutcomeCapacity, OutcomeUnavailable, OutcomeInvalid, OutcomeDenied, OutcomeLimited, OutcomeError}

// Outcomes returns every outcome Metrics.CallAnswered may be told, so
// that an implementation can export each series from the start.
func Outcomes() []string { return slices.Clone(callOutcomes) }

// noMetrics counts nothing and serves no /metrics: Config.Metrics nil.
type noMetrics struct{}

func (noMetrics) CallAnswered(string, string, time.Duration) {}
func (noMetrics) Audited(string, string)                     {}
func (noMetrics) AuthRefused(string, string)                 {}
func (noMetrics) Handler(*slog.Logger) http.Handler          { return nil }
