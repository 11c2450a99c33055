package prom_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/metrics/prom"
)

// TestAPIMetrics pins the API's families (names, types, help) and checks
// what each api.Metrics method counts: every series of calls and refused
// credentials is exported at 0 from the start; an unknown outcome counts
// as an error; an unknown credential is not counted. Without a runtime
// there are no runtime families, while the build's and Go's are served.
func TestAPIMetrics(t *testing.T) {
	m := prom.New(nil)
	var _ api.Metrics = m
	h := m.Handler(quietLogger())
	text := scrape(t, h)
	for _, line := range []string{
		"# HELP carmy_calls_total Answers to tool calls by transport (http: POST /v1/tools/call, mcp: tools/call at /mcp) and outcome: " +
			"ran, replayed, passthrough, conflict, uncertain, capacity, unavailable, invalid, denied, rate_limited, error.",
		"# TYPE carmy_calls_total counter",
		"# HELP carmy_call_duration_seconds Time to answer a tool call, by transport and outcome.",
		"# TYPE carmy_call_duration_seconds histogram",
		"# HELP carmy_auth_failures_total Requests refused for their credentials, by result: unauthorized (401: an unknown token or a malformed Authorization), rate_limited (429: the client address is over its failures per minute).",
		"# TYPE carmy_auth_failures_total counter",
		"# HELP carmy_cluster_key_failures_total Node-to-node requests (/internal/) refused for their cluster key, by result: unauthorized (403: a wrong key), rate_limited (429: the client address is over its failures per minute).",
		"# TYPE carmy_cluster_key_failures_total counter",
		`carmy_calls_total{outcome="awaiting",transport="mcp"} 0`,
		`carmy_calls_total{outcome="ran",transport="http"} 0`,
		`carmy_call_duration_seconds_bucket{outcome="ran",transport="http",le="0.0005"} 0`,
		`carmy_call_duration_seconds_bucket{outcome="ran",transport="http",le="60"} 0`,
		`carmy_auth_failures_total{result="unauthorized"} 0`,
		`carmy_auth_failures_total{result="rate_limited"} 0`,
		`carmy_cluster_key_failures_total{result="unauthorized"} 0`,
		"# TYPE carmy_build_info gauge",
		"# TYPE go_goroutines gauge",
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("GET /metrics lacks %q", line)
		}
	}
	if strings.Contains(text, "carmy_tool_duration_seconds") || strings.Contains(text, "carmy_store_entries") {
		t.Errorf("metrics made without a runtime export the runtime's families:\n%s", text)
	}

	m.CallAnswered(api.TransportMCP, api.OutcomeReplayed, 3*time.Millisecond)
	m.CallAnswered(api.TransportHTTP, "no such outcome", time.Millisecond)
	m.Audited(api.ActionCancel, "ok")
	m.Audited(api.ActionCancel, "NOT_FOUND")
	m.AuthRefused(api.CredentialToken, api.AuthUnauthorized)
	m.AuthRefused(api.CredentialToken, api.AuthUnauthorized)
	m.AuthRefused(api.CredentialClusterKey, api.AuthRateLimited)
	m.AuthRefused("no such credential", api.AuthRateLimited)
	text = scrape(t, h)
	for _, line := range []string{
		`carmy_calls_total{outcome="replayed",transport="mcp"} 1`,
		`carmy_call_duration_seconds_bucket{outcome="replayed",transport="mcp",le="0.002"} 0`,
		`carmy_call_duration_seconds_bucket{outcome="replayed",transport="mcp",le="0.005"} 1`,
		`carmy_calls_total{outcome="error",transport="http"} 1`,
		"# HELP carmy_admin_actions_total Audited actions (join, remove, cancel, resolve, release, approve, deny) by outcome: ok or the error code.",
		`carmy_admin_actions_total{action="cancel",outcome="ok"} 1`,
		`carmy_admin_actions_total{action="cancel",outcome="NOT_FOUND"} 1`,
		`carmy_auth_failures_total{result="unauthorized"} 2`,
		`carmy_auth_failures_total{result="rate_limited"} 0`,
		`carmy_cluster_key_failures_total{result="rate_limited"} 1`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("GET /metrics lacks %q", line)
		}
	}
}

// TestRegistryTakesMore checks that a collector registered with Registry
// (an application's, a cluster node's) is served by Handler.
func TestRegistryTakesMore(t *testing.T) {
	m := prom.New(nil)
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "app_orders_total", Help: "Orders."})
	m.Registry().MustRegister(c)
	c.Add(3)
	if text := scrape(t, m.Handler(quietLogger())); !strings.Contains(text, "app_orders_total 3\n") {
		t.Errorf("GET /metrics lacks the application's counter:\n%.500s", text)
	}
}
