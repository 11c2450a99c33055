// Package authfail carries, in a request's context, where a handler
// reports a failed authentication that the server in front of it counts:
// the API server (package api) counts the wrong cluster keys the
// node-to-node endpoints (package cluster) refuse, per client address,
// and answers 429 once a client is over its failures.
package authfail

import "context"

type reporterKey struct{}

// WithReporter returns ctx carrying report, which Report calls.
func WithReporter(ctx context.Context, report func(reason string)) context.Context {
	return context.WithValue(ctx, reporterKey{}, report)
}

// Report tells the reporter of ctx, if it carries one, that the request
// failed to authenticate, for reason (never the credential itself).
func Report(ctx context.Context, reason string) {
	if report, ok := ctx.Value(reporterKey{}).(func(string)); ok && report != nil {
		report(reason)
	}
}
