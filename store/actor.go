package store

import "context"

// actorKey is the context key of WithActor.
type actorKey struct{}

// WithActor returns ctx naming who decides what the store is asked to do
// under it: a principal, ResolvedByProbe, or a node's id. A replicated
// store records it in its audit ledger beside the decision (a cancel, a
// resolve, a release); a store that keeps no ledger ignores it. The
// runtime sets it once per decision, whatever the transport that asked
// (HTTP, MCP, the console, a probe).
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom returns the actor WithActor named, or "" (the store's own
// node decides).
func ActorFrom(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}
