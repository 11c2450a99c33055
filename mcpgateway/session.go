package mcpgateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An HTTP upstream that restarts (or ends a session) forgets the node's
// session: the MCP Streamable HTTP transport has it answer a request
// naming that session (Mcp-Session-Id) with 404 Not Found, unprocessed,
// and the client start a new session with initialize. A tools/call so
// refused never ran: it is not an answer lost, but a request never taken
// in. The gateway learns it from the transport, not from error text: the
// POST of the call's own request, naming a session, got a 404 status
// (refusedSession, marked on the call's state), and the SDK says the
// session is missing (mcp.ErrSessionMissing: a 404 whose body is no
// JSON-RPC answer — a 404 carrying a JSON-RPC error is the upstream's
// answer, and a 404 to a later GET resuming an event stream, after the
// request was taken in, marks nothing).
//
// The SDK ends the connection on that 404, and the upstream reconnects
// as for any lost connection. The call waits for that reconnection and
// is sent once more on the new session (reconnected), within the same
// attempt of the same execution; if the reconnection fails, or takes half
// the time the call has left, the call is an engine.NotSentError: the
// reservation is released and the caller answered UNAVAILABLE, so its
// retry runs the tool. A second refusal is not sent again.

// errSessionGone is wrapped by the error of a call the upstream refused
// unread because it no longer knows the session.
var errSessionGone = errors.New("the upstream MCP server no longer knows the session")

// mcpSessionHeader is the header naming an MCP session over HTTP.
const mcpSessionHeader = "Mcp-Session-Id"

// refusedSession reports whether resp refuses req, a JSON-RPC request
// (one with an id, not a notification) posted on a session, as made on
// a session the upstream does not know: 404.
func refusedSession(req *http.Request, resp *http.Response) bool {
	if resp.StatusCode != http.StatusNotFound || req.Method != http.MethodPost || req.Header.Get(mcpSessionHeader) == "" {
		return false
	}
	_, isRequest := requestID(req)
	return isRequest
}

// sessionRefused reports whether err, the error of the call of st, is
// the upstream's refusal of a session it does not know.
func sessionRefused(err error, st *callState) bool {
	return st.sessionGone.Load() && errors.Is(err, mcp.ErrSessionMissing)
}

// reconnected waits for the connection that replaces old: it returns it
// once an attempt to connect succeeds, or nil when the next attempt fails,
// the upstream is closed, ctx ends or half the time ctx has left passes
// (so that a call given up on is still released, not timed out).
func (u *Upstream) reconnected(ctx context.Context, old *conn) *conn {
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		defer cancel()
	}
	u.mu.Lock()
	cn, attempt, done := u.conn, u.attempt, u.done
	u.mu.Unlock()
	if cn != nil && cn != old {
		return cn
	}
	select {
	case <-attempt:
	case <-done:
		return nil
	case <-ctx.Done():
		return nil
	}
	if cn := u.current(); cn != old {
		return cn // nil when the attempt failed
	}
	return nil
}
