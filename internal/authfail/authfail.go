// Package authfail carries, in a request's context, where a handler
// reports a failed authentication that the server in front of it counts:
// the API server (package api) counts the wrong cluster keys the peer
// (node-to-node) endpoints (package cluster/peer) refuse, per client
// address, and answers 429 once a client is over its failures.
package authfail

import (
	"context"
	"net/http"
)

type reporterKey struct{}

// reporter is what WithReporter puts in a context.
type reporter struct {
	report func(reason string)
	refuse func(w http.ResponseWriter) bool
}

// WithReporter returns ctx carrying report, which Report calls, and
// refuse, which Refuse calls (nil: never refuses).
func WithReporter(ctx context.Context, report func(reason string), refuse func(w http.ResponseWriter) bool) context.Context {
	return context.WithValue(ctx, reporterKey{}, reporter{report: report, refuse: refuse})
}

// Report tells the reporter of ctx, if it carries one, that the request
// failed to authenticate, for reason (never the credential itself).
func Report(ctx context.Context, reason string) {
	if r, ok := ctx.Value(reporterKey{}).(reporter); ok && r.report != nil {
		r.report(reason)
	}
}

// Refuse asks the reporter of ctx whether the request, which failed to
// authenticate, comes from a client over its failures: if so, it has
// written the answer to w (429), and Refuse reports true; the caller then
// writes nothing. A request that authenticates is never refused: a
// client's failures never lock out a right credential sent from its
// address (another node behind the same address, say).
func Refuse(ctx context.Context, w http.ResponseWriter) bool {
	if r, ok := ctx.Value(reporterKey{}).(reporter); ok && r.refuse != nil {
		return r.refuse(w)
	}
	return false
}
