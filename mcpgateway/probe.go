package mcpgateway

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// probe checks, after a call of cn ended by its context (timed out,
// cancelled) without its answer, that a stdio child still answers: it
// must answer a ping within CancelGrace, or it is killed, and the
// upstream starts a new one. A child that stopped reading, or that serves
// one request at a time and hangs in one, would otherwise keep every
// later call waiting. Over HTTP, and while a probe of the child runs
// already, it does nothing.
func (u *Upstream) probe(cn *conn) {
	ch := cn.child
	if ch == nil || !ch.probing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer ch.probing.Store(false)
		grace := u.cfg.CancelGrace
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		answered := make(chan error, 1)
		// In a goroutine of its own: a write to a child that does not
		// read its stdin blocks whatever the context says.
		go func() { answered <- cn.cs.Ping(ctx, nil) }()
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case err := <-answered:
			var rpcErr *jsonrpc.Error
			if err == nil || errors.As(err, &rpcErr) && !localCode(rpcErr.Code) {
				return // it answers (an error answer is an answer)
			}
		case <-timer.C:
		case <-ch.exited:
			return
		}
		u.log.Warn("mcp server: the child did not answer a ping after a call ended without its answer; replacing it",
			slog.Int("pid", ch.pid()), slog.Duration("grace", grace))
		ch.kill()
	}()
}
