package fastpath

import "testing"

// BenchmarkParse times the fast path's passes over a 2026-07-28
// tools/call body of the go-sdk client (365 bytes), after the endpoint's
// screening (BenchmarkScreenScans in package api/mcp):
//
//	go test ./api/mcp/internal/fastpath -run '^$' -bench Parse -benchmem
func BenchmarkParse(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"carmy/request_id":"m-1","carmy/session_id":"cost",` +
		`"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"carmy-cost","version":"v1"},` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{"payload":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}}`)
	keys := []string{"carmy/request_id", "carmy/session_id", "carmy/metadata", "carmy/timeout_ms"}
	for _, bench := range []struct {
		name string
		scan func() bool
	}{
		{"plainJSON", func() bool { return plainJSON(body) }},
		{"parseFastCall", func() bool { _, ok := parseFastCall(body, true, keys); return ok }},
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
