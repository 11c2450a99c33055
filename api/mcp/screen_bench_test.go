package mcp

import (
	"testing"

	"github.com/carmyhq/carmy/api/internal/strictjson"
	"github.com/carmyhq/carmy/internal/jsonscan"
)

// BenchmarkScreenScans times each pass a 2026-07-28 tools/call body of
// the go-sdk client (365 bytes) goes through before its tool runs (the
// fast path's own, BenchmarkParse in package fastpath, after them):
//
//	go test ./api/mcp -run '^$' -bench ScreenScans -benchmem
func BenchmarkScreenScans(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"carmy/request_id":"m-1","carmy/session_id":"cost",` +
		`"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"carmy-cost","version":"v1"},` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{"payload":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}}`)
	for _, bench := range []struct {
		name string
		scan func() bool
	}{
		{"strictjson.Quick", func() bool { return strictjson.Quick(body) }},
		{"jsonscan.Valid", func() bool { return jsonscan.Valid(body) }},
		{"strictjson.Check", func() bool { return strictjson.Check(body) == nil }},
		{"isCallTool+idOfMessage", func() bool { return isCallTool(body) && idOfMessage(body) != nil }},
		{"mayBeOwn", func() bool { return !mayBeOwn(body) }},
	} {
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if !bench.scan() {
					b.Fatal("refused")
				}
			}
		})
	}
}
