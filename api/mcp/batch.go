package mcp

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/carmyhq/carmy/api/mcp/internal/fastpath"
	"github.com/carmyhq/carmy/internal/jsonscan"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/store"
)

// JSON-RPC batches exist in MCP up to protocol version 2025-03-26; version
// 2025-06-18 removed them. serveBatch refuses a batch at a version that
// has none (the SDK does too, but only after it read and held every
// entry), and serves one at an older version (or none, which the SDK
// reads as 2025-03-26) itself, one entry after another, each as a request
// of its own through serveOne: each entry counts against the principal's
// rate, and the answer is bounded:
//
//   - a batch of more than MaxBatchEntries entries, or of none, is
//     answered 400 with JSON-RPC error -32600, and no entry runs;
//   - the entries' answers together are bounded by MaxBatchAnswerBytes:
//     the entry whose answer would cross it gets, in its place, JSON-RPC
//     error CodeBatchFull (it ran: a tools/call sent again with its
//     carmy/request_id replays the result), and every later entry is not
//     run and gets the same error.
//
// Before this, a 1 MB body of 20,000 tools/list made a 45 MB answer.
const (
	MaxBatchEntries     = 100
	MaxBatchAnswerBytes = 4 << 20
)

// CodeBatchFull is the JSON-RPC error code of an entry of a batch whose
// answer is not in the batch's answer for want of room (MaxBatchAnswerBytes).
const CodeBatchFull = -32030

// firstVersionWithoutBatches is the protocol version that removed them.
var firstVersionWithoutBatches = mcpversion.First(func(f mcpversion.Features) bool { return !f.Batches })

// serveBatch serves body, a JSON array, as the batch of r: at a version
// of the table with batches (internal/mcpversion; none stated reads as
// one), and refused at a version from firstVersionWithoutBatches on; a
// batch of another version is left to the SDK, which refuses it.
func (h *Handler) serveBatch(w http.ResponseWriter, r *http.Request, body []byte) {
	version := r.Header.Get("Mcp-Protocol-Version")
	if version >= firstVersionWithoutBatches {
		msg := fmt.Sprintf("JSON-RPC batches are not served at protocol version %s (version %s removed them): send one message per request", version, firstVersionWithoutBatches)
		writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, msg, envelope(store.CodeInvalidRequest, nil, msg))
		return
	}
	if f, ok := mcpversion.Lookup(version); !ok || !f.Batches || !batchEligible(r) {
		r.Body = restoredBody(body, nil, r.Body)
		h.stream.ServeHTTP(w, r)
		return
	}
	entries, _ := jsonscan.ArrayElements(nil, body) // body is a valid JSON array (screen.go)
	if len(entries) == 0 || len(entries) > MaxBatchEntries {
		msg := fmt.Sprintf("a JSON-RPC batch holds 1 to %d messages, not %d", MaxBatchEntries, len(entries))
		writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, msg, envelope(store.CodeInvalidRequest, nil, msg))
		return
	}
	var (
		out        bytes.Buffer
		retryAfter string
		full       bool
	)
	out.WriteByte('[')
	add := func(answer []byte) {
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		out.Write(answer)
	}
	for _, entry := range entries {
		id := idOfMessage(entry)
		if full {
			add(rpcError(id, CodeBatchFull, fmt.Sprintf("not run: the batch's answer reached its limit of %d bytes; send this message again, on its own or in a smaller batch", MaxBatchAnswerBytes), nil))
			continue
		}
		rec := &entryRecorder{header: http.Header{}, room: MaxBatchAnswerBytes - out.Len()}
		sub := r.Clone(r.Context())
		sub.Body, sub.ContentLength = io.NopCloser(bytes.NewReader(entry)), int64(len(entry))
		ww := &refusalWriter{ResponseWriter: rec}
		h.serveOne(ww, sub, entry, true)
		ww.finish()
		if v := rec.header.Get("Retry-After"); v != "" {
			retryAfter = v
		}
		switch answer := bytes.TrimSpace(rec.buf.Bytes()); {
		case rec.over:
			full = true
			add(rpcError(id, CodeBatchFull, fmt.Sprintf("this message ran, but its answer does not fit in the batch's limit of %d bytes: send it again on its own (a tools/call with a carmy/request_id replays its result)", MaxBatchAnswerBytes), nil))
		case len(answer) > 0:
			add(answer)
		}
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	if out.Len() == 1 { // notifications and responses only
		w.WriteHeader(http.StatusAccepted)
		return
	}
	out.WriteByte(']')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	_, _ = w.Write(out.Bytes())
}

// batchEligible reports whether r passes the transport's checks that come
// before the SDK reads a body (the method and Content-Type are checked
// already): else the SDK refuses the batch as it is.
func batchEligible(r *http.Request) bool {
	jsonOK, streamOK := fastpath.Accepts(r.Header.Values("Accept"))
	return jsonOK && streamOK && len(r.Header.Values("Last-Event-ID")) == 0
}

// entryRecorder holds the answer to one entry of a batch, up to room
// bytes: past it, over is set and the rest is dropped.
type entryRecorder struct {
	header http.Header
	status int
	buf    bytes.Buffer
	room   int
	over   bool
}

func (e *entryRecorder) Header() http.Header { return e.header }

func (e *entryRecorder) WriteHeader(status int) {
	if e.status == 0 {
		e.status = status
	}
}

func (e *entryRecorder) Write(p []byte) (int, error) {
	if e.status == 0 {
		e.status = http.StatusOK
	}
	if e.over || e.buf.Len()+len(p) > e.room {
		e.over = true
		e.buf.Reset()
		return len(p), nil
	}
	return e.buf.Write(p)
}

// Flush is a no-op: the entry's answer is written with the batch's.
func (e *entryRecorder) Flush() {}
