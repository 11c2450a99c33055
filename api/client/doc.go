// Package client is a Go client of Carmy's HTTP API (docs/api.md): call tools
// at most once, with retries that are safe by construction, and reconcile
// the executions whose fate is uncertain.
//
// # Safe retries
//
// Every call carries a request_id (Call generates one unless RequestID
// gives it), and every retry of the call sends the same one, so the node
// runs the tool at most once however many attempts reach it. Call retries
// what is transient: transport errors, UNAVAILABLE, RATE_LIMITED, a
// proxy's 502/503/504, and EXECUTION_UNCERTAIN while an earlier attempt
// still runs (the retry then gets its outcome, replayed). It never retries
// what another attempt cannot change (IDEMPOTENCY_CONFLICT, invalid or
// unauthorized requests, IDEMPOTENCY_CAPACITY, NOT_FOUND), nor
// EXECUTION_UNCERTAIN of an interrupted execution, whose runner died: only
// someone who can check the tool's effects can settle it.
//
// # Errors
//
// A tool that failed, timed out or was cancelled is a Result with that
// status (Result.Err gives it as an error), because that outcome is
// recorded and replayed. Errors are *RequestError values that wrap the
// last attempt's *APIError (the envelope of docs/errors.md, matched with errors.Is
// against ErrConflict, ErrUncertain, ErrInterrupted, …), *ProtocolError
// (an answer that is not Carmy's) or transport error.
//
// # The agent loop
//
// Give each step of the agent a request_id of its own, kept with the step,
// so that a restarted agent repeats the step without repeating its effect:
//
//	c, err := client.New("https://carmy.internal:8080", client.WithToken(token))
//	if err != nil { … }
//	step := client.NewRequestID() // stored with the step before the first attempt
//
//	res, err := c.Call(ctx, "create_order", map[string]any{"sku": "KB-01"},
//		client.RequestID(step), client.Session("sess-1"))
//	switch {
//	case err == nil && res.Err() == nil:
//		// completed: res.Data (res.Replayed when an earlier attempt ran it)
//	case err == nil:
//		// failed, timed_out or cancelled: recorded; retrying replays it
//	case errors.Is(err, client.ErrInterrupted):
//		// The runner died mid-call: did the order happen? Check the
//		// system the tool acts on, then settle the execution.
//		var ae *client.APIError
//		errors.As(err, &ae)
//		if orderExists {
//			_, err = c.Resolve(ctx, ae.ExecutionID, client.Completed(order))
//		} else {
//			_, err = c.Resolve(ctx, ae.ExecutionID, client.Released()) // the next Call runs it
//		}
//	case errors.Is(err, client.ErrUncertain):
//		// Still running after every retry: Lookup later, or Cancel.
//		exec, _ := c.Lookup(ctx, step, "sess-1")
//		_ = exec
//	case errors.Is(err, client.ErrConflict):
//		// step was used for a different call: a bug in the agent
//	default:
//		// unreachable, unauthorized, …: the same step may be retried
//		// later with the same request_id, safely
//	}
package client
