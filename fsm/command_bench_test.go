package fsm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/fsm"
)

// benchResultData is a ~256 B JSON result, as a typical tool returns.
var benchResultData = `{"order_id":"ord_5521","status":"accepted","total":140.05,"currency":"EUR",` +
	`"items":[{"sku":"KB-01","qty":2},{"sku":"MS-07","qty":1}],"eta":"2026-12-03",` +
	`"note":"` + strings.Repeat("x", 256-160) + `"}`

// benchCommands are a Reserve and a Complete as a runtime proposes them.
func benchCommands() []struct {
	name string
	cmd  fsm.Command
} {
	const id = "exec_01JD8Z0Q4R5S6T7V8W9X0Y1Z2A"
	return []struct {
		name string
		cmd  fsm.Command
	}{
		{"reserve", fsm.Reserve(key("req-7f3a9c"), fp, execution(id, "n1"))},
		{"complete", fsm.Complete(key("req-7f3a9c"), fp, completed(id, benchResultData, t0.Add(time.Second)))},
	}
}

// BenchmarkEncode measures fsm.Encode of a command into its log bytes.
func BenchmarkEncode(b *testing.B) {
	for _, c := range benchCommands() {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fsm.Encode(c.cmd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecode measures fsm.Decode of a command's log bytes.
func BenchmarkDecode(b *testing.B) {
	for _, c := range benchCommands() {
		data := mustEncode(b, c.cmd)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := fsm.Decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
