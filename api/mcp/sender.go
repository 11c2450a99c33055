package mcp

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"github.com/carmyhq/carmy/internal/mcpversion"
)

// Who sent a message, for notifications/cancelled (inflight.go).
//
// A JSON-RPC id means something only within one MCP transport session:
// every client numbers its requests from 1. Neither the principal nor
// the Carmy session (carmy/session_id, Carmy-Session-Id) is a
// connection — two agents of one principal routinely share both — so a
// notification is matched to a call of the same sender, the same
// principal, Carmy session, MCP transport session and kind of protocol
// version (senderKey).
//
// The transport session: before 2026-07-28, Carmy's answer to
// initialize assigns one (Mcp-Session-Id, which MCP lets a server do;
// patchSession), and the client sends it with every request after. It
// names the client's connection and nothing else: no node keeps it or
// checks it, any node answers any request with any session or none, and
// none is ever ended (a DELETE is refused 405, as MCP allows). From
// 2026-07-28 on there is no initialize and no transport session; a
// notification then names a call of the same principal and Carmy
// session made at 2026-07-28 or later without a transport session, and
// two such clients that share both and cancel the same id cancel each
// other's calls. At that version a client cancels by closing the
// response stream (detached.go), which names its own call exactly, so
// a notification rarely has anything left to cancel.

// McpSessionHeader carries the MCP transport session of a request.
const McpSessionHeader = "Mcp-Session-Id"

// sender is who sent a message: what a notifications/cancelled must
// share with the tools/call it names.
type sender struct {
	principal string
	session   string // the Carmy session
	transport string // the MCP transport session, "" without one
	// stateless says the protocol version is 2026-07-28 or later: a
	// notification of such a version names no call of an older one, nor
	// the reverse (a client speaks one version throughout).
	stateless bool
}

// senderOf is the sender of a request by principal in Carmy session
// session, of header, at protocol version.
func senderOf(principal, session string, header http.Header, version string) sender {
	return sender{principal: principal, session: session, transport: header.Get(McpSessionHeader),
		stateless: mcpversion.For(version).Stateless}
}

// newTransportSession is a fresh MCP transport session: 128 random
// bits, in hex (visible ASCII, as MCP requires).
func newTransportSession() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// patchSession assigns a transport session to the client of an
// initialize answered with result before 2026-07-28: it sets
// Mcp-Session-Id in header, the answer's.
func patchSession(header http.Header, result map[string]any) {
	if v, _ := result["protocolVersion"].(string); v != "" && !mcpversion.For(v).Stateless {
		header.Set(McpSessionHeader, newTransportSession())
	}
}
