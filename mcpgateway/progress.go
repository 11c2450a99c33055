package mcpgateway

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
)

// progressRoutes passes an upstream's notifications/progress on to the
// callers that listen (docs/mcp.md#progress): a call whose caller listens
// (engine.ProgressSink) sends the upstream a progressToken of its own,
// "carmy-<n>", never the caller's, and each notification naming that
// token reaches its caller's sink. A notification naming no call in
// flight (late, or made up) is dropped.
type progressRoutes struct {
	next  atomic.Uint64
	mu    sync.Mutex
	sinks map[string]func(engine.Progress)
	// delivered counts the notifications delivered, for settle.
	delivered atomic.Uint64
}

// The SDK's client hands notifications to their handler on a goroutine
// of their own, in order, while it answers the call at once: the last
// progress of a call may reach its handler just after the call returned.
// settle waits for such stragglers: until progressQuiet passes with no
// notification delivered, at most progressSettleMax.
const (
	progressQuiet     = 20 * time.Millisecond
	progressSettleMax = 200 * time.Millisecond
)

// settle waits until no notification has been delivered for
// progressQuiet, or progressSettleMax has passed.
func (p *progressRoutes) settle() {
	end := time.Now().Add(progressSettleMax)
	for last := p.delivered.Load(); time.Now().Before(end); {
		time.Sleep(progressQuiet)
		now := p.delivered.Load()
		if now == last {
			return
		}
		last = now
	}
}

// add routes a new token to sink and returns the token.
func (p *progressRoutes) add(sink func(engine.Progress)) string {
	token := "carmy-" + strconv.FormatUint(p.next.Add(1), 10)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sinks == nil {
		p.sinks = make(map[string]func(engine.Progress))
	}
	p.sinks[token] = sink
	return token
}

// remove ends a token's route.
func (p *progressRoutes) remove(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.sinks, token)
}

// deliver passes one notification to its call's sink.
func (p *progressRoutes) deliver(n *mcp.ProgressNotificationParams) {
	if n == nil {
		return
	}
	token, ok := n.ProgressToken.(string)
	if !ok {
		return
	}
	p.mu.Lock()
	sink := p.sinks[token]
	p.mu.Unlock()
	p.delivered.Add(1)
	if sink != nil {
		sink(engine.Progress{Progress: n.Progress, Total: n.Total, Message: n.Message})
	}
}
