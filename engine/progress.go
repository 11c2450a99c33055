package engine

import "context"

// Progress is what a running tool reports of its advance (MCP's
// notifications/progress): Progress grows with each report; Total, when
// known, is where it ends (0: unknown); Message says what it is doing.
type Progress struct {
	Progress float64
	Total    float64
	Message  string
}

type progressKey struct{}

// withProgress gives the tool's context the caller's progress sink.
func withProgress(ctx context.Context, sink func(Progress)) context.Context {
	if sink == nil {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, sink)
}

// ProgressSink returns where a tool's progress goes: the sink of the call
// (Request.Progress) that runs it on this node, or nil when nobody
// listens. A tool that forwards a call (an upstream MCP server's) asks
// for progress only when there is a sink.
func ProgressSink(ctx context.Context) func(Progress) {
	sink, _ := ctx.Value(progressKey{}).(func(Progress))
	return sink
}

// ReportProgress tells the caller of the tool running under ctx how far
// it got, when the caller listens; otherwise it does nothing.
func ReportProgress(ctx context.Context, p Progress) {
	if sink := ProgressSink(ctx); sink != nil {
		sink(p)
	}
}

// CancelRun cancels the tool of an execution that runs on this node, with
// the cause a cancel gives (its outcome reads cancelled), whether or not
// the execution is recorded, and reports whether one ran. It authorizes
// nothing: the caller has (a call without request_id has no record that
// Cancel could authorize against; its own caller holds its id).
func (r *Runtime) CancelRun(id string) bool { return r.runs.cancel(id, errCancelled) }
