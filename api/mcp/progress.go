package mcp

import (
	"encoding/json"
	"net/http"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/jsonscan"
)

// Progress (docs/mcp.md#progress): a tools/call whose _meta has a progressToken,
// from a client that accepts text/event-stream, is answered on an event
// stream: a notifications/progress event for each progress the tool
// reports while it runs on this node (an upstream MCP server's, passed
// on by the gateway, with the caller's token in place of the one the
// gateway gave the upstream), then the response. The stream opens when
// the first event is ready, so a call that reports nothing is answered
// as any other, on a stream of one event. A replay reports no progress.

// progressBuffer bounds the progress events waiting to be written; a
// tool that reports faster than the client reads loses the excess (a
// later report says as much as the lost ones).
const progressBuffer = 64

// serveProgressCall answers a tools/call with a progressToken on an event
// stream.
func (h *Handler) serveProgressCall(w http.ResponseWriter, r *http.Request, msg ownMessage, p ownParams) {
	token := p.Meta[metaProgressToken]
	events := make(chan engine.Progress, progressBuffer)
	mode := &callMode{progress: func(pr engine.Progress) {
		select {
		case events <- pr:
		default:
		}
	}}
	ctx := withRPCID(withCallMode(r.Context(), mode), msg.ID)
	type answered struct {
		raw []byte
	}
	done := make(chan answered, 1)
	go func() {
		res, err := h.middleware(h.runTool)(ctx, methodCallTool, callRequest(r, p))
		if err != nil {
			done <- answered{rpcErrorBytes(msg.ID, err)}
			return
		}
		raw, mErr := jsonscan.MarshalNoHTML(res)
		if mErr != nil {
			done <- answered{rpcErrorBytes(msg.ID, mErr)}
			return
		}
		done <- answered{responseBytes(msg.ID, raw)}
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	flush(w)
	for {
		select {
		case pr := <-events:
			writeEvent(w, progressNotification(token, pr))
			flush(w)
		case a := <-done:
			for drained := false; !drained; {
				select {
				case pr := <-events:
					writeEvent(w, progressNotification(token, pr))
				default:
					drained = true
				}
			}
			writeEvent(w, a.raw)
			flush(w)
			return
		}
	}
}

// progressNotification is a notifications/progress of token.
func progressNotification(token any, p engine.Progress) []byte {
	params := map[string]any{"progressToken": token, "progress": p.Progress}
	if p.Total != 0 {
		params["total"] = p.Total
	}
	if p.Message != "" {
		params["message"] = p.Message
	}
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
	return raw
}

// writeEvent writes one server-sent event holding a JSON-RPC message.
func writeEvent(w http.ResponseWriter, data []byte) {
	_, _ = w.Write([]byte("event: message\ndata: "))
	_, _ = w.Write(data)
	_, _ = w.Write([]byte("\n\n"))
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// rpcErrorBytes is the JSON-RPC error answer of err to id.
func rpcErrorBytes(id json.RawMessage, err error) []byte {
	rec := &bufferWriter{header: http.Header{}}
	writeErrorResult(rec, id, err)
	return rec.buf
}

// bufferWriter keeps what is written to it.
type bufferWriter struct {
	header http.Header
	buf    []byte
}

func (b *bufferWriter) Header() http.Header         { return b.header }
func (b *bufferWriter) WriteHeader(int)             {}
func (b *bufferWriter) Write(p []byte) (int, error) { b.buf = append(b.buf, p...); return len(p), nil }
