package mcp

import (
	"context"
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
)

// CallInfo is what Config.Observe is told of one tools/call: who called
// which tool under which identity, which execution answered, and how.
// Code is "" for a call answered with its record (Replayed says whether
// it was a replay), else the error code (docs/errors.md) of the refusal
// (UNKNOWN_TOOL for the JSON-RPC error -32602, INTERNAL for -32603).
type CallInfo struct {
	Principal, Tool, RequestID, SessionID string
	ExecutionID, Status                   string
	Replayed                              bool
	// Passthrough says the call's tool is read-only: it ran, and nothing
	// was reserved or recorded (engine.Response.Passthrough).
	Passthrough bool
	Code        string
	Took        time.Duration
	// StoreDetail is what the store's backend said of a failure the
	// answer reports without it (store.DetailOf), for the node's log.
	StoreDetail string

	caller *engine.Caller
	// ran is the result of the call the runtime made, for the SDK's
	// tool handler (handOver).
	ran *sdk.CallToolResult
}

type callInfoKey struct{}

func withCallInfo(ctx context.Context, info *CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, info)
}

func callInfoOf(ctx context.Context) *CallInfo {
	info, _ := ctx.Value(callInfoKey{}).(*CallInfo)
	return info
}

// headerOf returns the HTTP request's header, nil when there is none.
func headerOf(extra *sdk.RequestExtra) http.Header {
	if extra == nil {
		return nil
	}
	return extra.Header
}
