package engine

import (
	"context"
	"errors"
	"sync/atomic"
)

// When a tool's request starts to leave this node. A caller that must not
// promise an execution before it is sure to be recorded (an MCP task call:
// docs/mcp.md) asks to be told (Request.OnSent): a request that never
// left is released, not recorded (fate.go), so until a byte of it is
// written the execution may vanish.
//
// A tool that calls an upstream says when (ToolSpec.MarksSent, MarkSent);
// any other tool counts as sent when it is invoked. A tool that says it
// but never calls MarkSent counts as sent when it returns, unless it
// fails with ErrNotSent (then it was never sent, and OnSent is not called).

type sentKey struct{}

// sentHook is Request.OnSent, called at most once.
type sentHook struct {
	done atomic.Bool
	f    func()
}

func (h *sentHook) mark() {
	if h.done.CompareAndSwap(false, true) {
		h.f()
	}
}

// startSent begins watching whether the tool's request of p has left, as
// invoke runs its tool under ctx: it returns ctx (carrying the hook, for a
// tool that marks it itself) and the function to call with the tool's
// error once it has returned. A call without Request.OnSent costs
// nothing.
func startSent(ctx context.Context, p *pending) (context.Context, func(error)) {
	if p.req.OnSent == nil {
		return ctx, nil
	}
	if !p.tool.MarksSent {
		p.req.OnSent()
		return ctx, nil
	}
	h := &sentHook{f: p.req.OnSent}
	return context.WithValue(ctx, sentKey{}, h), func(err error) {
		if !errors.Is(err, ErrNotSent) {
			h.mark()
		}
	}
}

// SentFunc returns the function that tells the caller of the tool running
// under ctx that the tool's request started to leave this node, or nil
// when nobody waits for it. It is safe to call from any goroutine, and
// more than once (only the first call counts). A tool that learns it deep
// in a transport takes it once, when it starts.
func SentFunc(ctx context.Context) func() {
	if h, ok := ctx.Value(sentKey{}).(*sentHook); ok {
		return h.mark
	}
	return nil
}

// MarkSent tells the caller of the tool running under ctx that the tool's
// request started to leave this node: the first byte of it was written
// to the upstream (ToolSpec.MarksSent). A tool calls it at the point
// that decides between ErrNotSent and sent: after it, the tool must not
// fail with ErrNotSent. Without a caller that waits, it does nothing.
func MarkSent(ctx context.Context) {
	if f := SentFunc(ctx); f != nil {
		f()
	}
}
