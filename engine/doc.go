// Package engine is Carmy's tool runtime: what runs a call. It runs tools
// for AI agents and makes their retries safe.
//
// A call names a tool, its JSON arguments and, optionally, a request_id.
// With a request_id, the runtime reserves the call's identity (principal,
// session, request_id) in a store.Store before the tool runs, records the
// outcome afterwards, and answers every retry from that record: a replay
// when finished, a conflict when the arguments differ, an uncertain answer
// while the first attempt runs or after its runner died. The tool body
// starts at most once per identity.
//
// The path of one call is Runtime.Call: validate, reserve, run the tool in
// its own goroutine with its own context (the tool's timeout, lowered by
// the call's), record the outcome, answer. The caller's context does not
// own the execution: a caller that goes away does not stop the tool, whose
// result is recorded and replayed to the next retry.
//
// A Go program that needs no HTTP uses this package alone:
//
//	rt := engine.New()
//	rt.Tool("create_order", createOrder) // func(ctx context.Context, call engine.Call) (any, error)
//	rt.IdempotencyStore(myBackend)       // default: store.NewMemory(store.DefaultCapacity); engine.Basic{Store: myStore}
//	resp, err := rt.Call(ctx, engine.Caller{Principal: "planner"}, engine.Request{Tool: "create_order", RequestID: "order-7f3"})
//
// Every error a method returns carries an error code of docs/errors.md (store.Coded), so
// a server maps it to a status without knowing this package's types.
//
// Dependencies point one way: engine imports store and no package above
// it. Package api (the HTTP server) imports engine, and the root package
// carmy (the facade that assembles runtime, API and metrics) imports both.
// engine links no HTTP framework, no Prometheus and no Raft: metrics plug
// in through an Observer (WithObserver), and a cluster or a fleet through
// the Backend it provides (backend.go: the store.Store, and the peeking,
// liveness, readiness and cancel delivery beside it; every method
// required, none asserted). TestLayout checks this.
package engine
