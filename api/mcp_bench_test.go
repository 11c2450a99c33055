package api_test

// BenchmarkHTTPCall and BenchmarkMCPCall make the same new call (a fresh
// request_id, the echo tool, 64 bytes of arguments, a session) through one
// API server, POST /v1/tools/call and tools/call at /mcp, in process and
// without a network: their ratio is what the MCP endpoint costs over the
// HTTP API, apart from the store (an in-memory one here; Raft's fsyncs
// dominate both on a real node, see `carmy bench`).
//
//	go test ./api -run '^$' -bench 'Benchmark(HTTP|MCP)Call' -benchmem -count 6

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

const benchPayload = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01"

// benchServer returns an API server (auth off, as `carmy serve --dev`)
// over a real runtime with the echo tool and an in-memory store that
// never fills. Its call log is formatted at level and dropped, as a
// node's is formatted and written (a node at --log-level warn formats no
// line per call).
func benchServer(b *testing.B, level slog.Level) http.Handler {
	b.Helper()
	rt := engine.New(engine.WithLogger(quietLogger()))
	rt.IdempotencyStore(store.NewMemory(math.MaxInt32))
	rt.Tool("echo", func(_ context.Context, c engine.Call) (any, error) { return c.Arguments, nil })
	if err := rt.Err(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			b.Errorf("Shutdown: %v", err)
		}
	})
	return mustNew(b, rt, api.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: level}))})
}

// benchCalls runs body(id) with a fresh id per call through h, from
// GOMAXPROCS goroutines, and checks every answer with ok.
func benchCalls(b *testing.B, h http.Handler, path string, header http.Header, body func(id string) string, ok func(*httptest.ResponseRecorder) bool) {
	b.Helper()
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := "bench-" + strconv.FormatInt(n.Add(1), 10)
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body(id)))
			req.Host = "127.0.0.1:8080"
			req.RemoteAddr = "127.0.0.1:40000"
			for k, v := range header {
				req.Header[k] = v
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if !ok(w) {
				b.Errorf("%s: %d %s", path, w.Code, w.Body.String())
				return
			}
		}
	})
}

func BenchmarkHTTPCall(b *testing.B) {
	h := benchServer(b, slog.LevelInfo)
	benchCalls(b, h, "/v1/tools/call", http.Header{"Content-Type": {"application/json"}},
		func(id string) string {
			return `{"tool":"echo","arguments":{"payload":"` + benchPayload + `"},"session_id":"bench","request_id":"` + id + `"}`
		},
		func(w *httptest.ResponseRecorder) bool {
			return w.Code == http.StatusOK && w.Header().Get("Idempotent-Replayed") == ""
		})
}

func BenchmarkMCPCall(b *testing.B) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		b.Run(version, func(b *testing.B) {
			h := benchServer(b, slog.LevelInfo)
			header := http.Header{
				"Content-Type":         {"application/json"},
				"Accept":               {"application/json, text/event-stream"},
				"Mcp-Protocol-Version": {version},
			}
			protoMeta := ""
			if version == "2026-07-28" {
				// What the go-sdk client sends with every call at this version.
				header["Mcp-Method"], header["Mcp-Name"] = []string{"tools/call"}, []string{"echo"}
				protoMeta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"v1"},` +
					`"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},`
			}
			benchCalls(b, h, "/mcp", header,
				func(id string) string {
					return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"payload":"` + benchPayload +
						`"},"_meta":{` + protoMeta + `"carmy/session_id":"bench","carmy/request_id":"` + id + `"}}}`
				},
				func(w *httptest.ResponseRecorder) bool {
					return w.Code == http.StatusOK && bytes.Contains(w.Body.Bytes(), []byte(`"carmy/replayed":false`))
				})
		})
	}
}
