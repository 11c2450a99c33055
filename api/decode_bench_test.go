package api

import (
	"strings"
	"testing"
)

// benchBodies are call bodies of the sizes agents send: docs/api.md's
// example, one without request_id, and one with larger arguments.
var benchBodies = map[string]string{
	"spec":        `{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"order-7f3","session_id":"sess-1","metadata":{"agent":"planner"},"timeout_ms":5000}`,
	"unrecorded":  `{"tool":"create_order","arguments":{"sku":"KB-01","qty":2}}`,
	"arguments4k": `{"tool":"search","arguments":{"query":"` + strings.Repeat("carmy ", 600) + `","filters":{"lang":"en","tags":["a","b","c"],"limit":20,"score":0.75}},"request_id":"search-1"}`,
}

// BenchmarkDecodeCall measures decodeCall, the fast path included, on
// well-formed bodies.
func BenchmarkDecodeCall(b *testing.B) {
	for name, body := range benchBodies {
		raw := []byte(body)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeCall(raw, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeCallStrictOnly is BenchmarkDecodeCall without the
// fastCallBody shortcut: decodeStrict alone, as for any other body.
func BenchmarkDecodeCallStrictOnly(b *testing.B) {
	for name, body := range benchBodies {
		raw := []byte(body)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				var cb callBody
				if err := decodeStrict(raw, &cb); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
