package mcp

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The transport's own refusals (a wrong method, a wrong Accept or
// Content-Type, a body that is not JSON-RPC or is over the limit, a
// missing token) are answered by the SDK in plain text. refusalWriter gives
// them JSON-RPC's shape instead, with the same status:
//
//	{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"…"}}
//
// so that a client always reads an MCP error, never a page of text.

// maxErrorText bounds the text of a refusal that is kept.
const maxErrorText = 1024

// refusalWriter passes an answer through, except a plain-text error
// (status ≥ 400), whose text it holds until finish writes it as a
// JSON-RPC error.
type refusalWriter struct {
	http.ResponseWriter
	wrote   bool
	status  int
	convert bool
	text    bytes.Buffer
}

func (w *refusalWriter) WriteHeader(status int) {
	if w.wrote {
		return
	}
	w.wrote, w.status = true, status
	if status >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.convert = true
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *refusalWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.convert {
		if room := maxErrorText - w.text.Len(); room > 0 {
			w.text.Write(p[:min(len(p), room)])
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Flush flushes an answer being streamed.
func (w *refusalWriter) Flush() {
	if w.convert {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes the held refusal.
func (w *refusalWriter) finish() {
	if !w.convert {
		return
	}
	msg := strings.TrimSpace(w.text.String())
	code := jsonrpc.CodeInvalidRequest
	switch {
	case w.status >= 500:
		code = jsonrpc.CodeInternalError
	case strings.HasPrefix(msg, "malformed payload"):
		code = jsonrpc.CodeParseError
	}
	w.Header().Del("Content-Length")
	WriteError(w.ResponseWriter, w.status, code, msg, nil)
}

// WriteError answers a request with a JSON-RPC error of no id (the
// request was not read as one), with status and, when data is not nil,
// data (for Carmy's refusals: the error object of docs/errors.md).
func WriteError(w http.ResponseWriter, status, code int, message string, data any) {
	writeRPCError(w, status, nil, code, message, data)
}
