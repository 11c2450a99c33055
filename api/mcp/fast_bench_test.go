package mcp

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/carmyhq/carmy/internal/mcpversion"
)

// BenchmarkToolsCall measures one tools/call through the endpoint alone
// (over detRuntime, which answers at once), on the fast path and with
// every request through the SDK, at 2025-11-25 and at 2026-07-28 (whose
// calls carry the protocol's _meta and the Mcp-Method and Mcp-Name
// headers, as the go-sdk client sends them):
//
//	go test ./api/mcp -run '^$' -bench ToolsCall -benchmem
func BenchmarkToolsCall(b *testing.B) {
	for _, bench := range []struct{ path, version string }{
		{"fast", "2025-11-25"}, {"sdk", "2025-11-25"}, {"fast", mcpversion.V20260728}, {"sdk", mcpversion.V20260728},
	} {
		path, version := bench.path, bench.version
		protoMeta := ""
		if version == mcpversion.V20260728 {
			protoMeta = newMeta + ","
		}
		b.Run(path+"/"+version, func(b *testing.B) {
			p := newPathPair(b, true)
			h := p.fast
			if path == "sdk" {
				h = p.sdk
			}
			h.cfg.Observe = nil // nothing to collect
			var n atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := strconv.FormatInt(n.Add(1), 10)
					body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"payload":"0123456789abcdef0123456789abcdef"},"_meta":{` + protoMeta + `"carmy/session_id":"bench","carmy/request_id":"r-` + id + `"}}}`
					r := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
					r.Header.Set("Content-Type", "application/json")
					r.Header.Set("Accept", "application/json, text/event-stream")
					r.Header.Set("Mcp-Protocol-Version", version)
					r.Header.Set("Mcp-Method", methodCallTool)
					r.Header.Set("Mcp-Name", "echo")
					r.Header.Set("Authorization", "Bearer tok-all")
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusOK {
						b.Errorf("%d %s", w.Code, w.Body.String())
						return
					}
				}
			})
		})
	}
}
