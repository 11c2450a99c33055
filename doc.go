// Package carmy runs tools for AI agents and makes their retries safe.
//
// A call names a tool, its JSON arguments and, optionally, a request_id. With
// a request_id, the runtime reserves the call's identity (principal,
// session, request_id) in a store.Store before the tool runs, records the
// outcome afterwards, and answers every retry from that record: a replay
// when finished, a conflict when the arguments differ, an uncertain answer
// while the first attempt runs or after its runner died. The tool body starts
// at most once per identity.
//
// A library user builds an App, registers tools, and runs it:
//
//	app := carmy.App()
//	app.Tool("create_order", createOrder) // func(ctx context.Context, call carmy.Call) (any, error)
//	app.IdempotencyStore(myStore)         // default: store.NewMemory(store.DefaultCapacity)
//	err := app.Run(ctx)                   // serves the HTTP API until ctx is done
//
// The path of one call is Runtime.Call: validate, reserve, run the tool in
// its own goroutine with its own context (the tool's timeout, lowered by the
// call's), record the outcome, answer. The caller's context does not own
// the execution: a caller that goes away does not stop the tool, whose
// result is recorded and replayed to the next retry.
package carmy
