package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/jcs"
)

// benchArgs are call arguments of three sizes: a flat ~64 B object, a
// nested ~1 KiB one and a ~64 KiB one (an array of line items).
var benchArgs = []struct {
	name string
	args json.RawMessage
}{
	{"small", json.RawMessage(`{"sku":"KB-01","quantity":2,"express":true,"note":"gift wrap"}`)},
	{"medium", json.RawMessage(`{
  "customer": {"id": "cus_8f3a2b", "name": "Zoë Müller", "email": "zoe@example.com", "tier": "gold", "verified": true},
  "shipping": {"street": "Hauptstraße 12", "city": "Berlin", "zip": "10115", "country": "DE", "instructions": null},
  "items": [
    {"sku": "KB-01", "name": "Keyboard", "quantity": 2, "price": 49.9, "tags": ["hardware", "usb"]},
    {"sku": "MS-07", "name": "Mouse", "quantity": 1, "price": 19.5, "tags": ["hardware", "wireless"]},
    {"sku": "CB-12", "name": "Cable \u2192 USB-C", "quantity": 3, "price": 7.25, "tags": ["accessory"]},
    {"sku": "DK-30", "name": "Dock", "quantity": 1, "price": 129, "tags": ["hardware", "thunderbolt"], "warranty_years": 2}
  ],
  "payment": {"method": "card", "last4": "4242", "amount": 140.05, "currency": "EUR", "captured": false},
  "options": {"express": true, "gift": false, "insurance": 1.5e1, "coupon": "WINTER-25"},
  "trace": {"source": "agent/planner", "step": 7, "attempt": 1, "parent": "exec_01JD8Z0Q4R5S6T7V8W9X0Y1Z2A"}
}`)},
	{"large", largeArgs(64 << 10)},
}

// largeArgs returns a JSON object of about n bytes: {"items":[...]} with
// line items of mixed member types.
func largeArgs(n int) json.RawMessage {
	var sb strings.Builder
	sb.WriteString(`{"order":"ord_5521","items":[`)
	for i := 0; sb.Len() < n-64; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"sku":"SKU-%05d","qty":%d,"price":%d.%02d,"gift":%t,"tags":["a","b\u00e9"],"note":null}`,
			i, i%7+1, i%500, i%100, i%3 == 0)
	}
	sb.WriteString(`]}`)
	return json.RawMessage(sb.String())
}

var benchMeta = json.RawMessage(`{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`)

// BenchmarkFingerprintSizes measures store.Fingerprint (JCS + SHA-256) of a
// call's arguments and metadata, per argument size.
func BenchmarkFingerprintSizes(b *testing.B) {
	for _, a := range benchArgs {
		b.Run(fmt.Sprintf("%s-%dB", a.name, len(a.args)), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(a.args)))
			for b.Loop() {
				if _, err := store.Fingerprint("create_order", a.args, benchMeta); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkJCSAppendCanonical measures jcs.AppendCanonical alone (into a
// reused buffer), per argument size, to separate canonicalisation from
// hashing.
func BenchmarkJCSAppendCanonical(b *testing.B) {
	for _, a := range benchArgs {
		b.Run(fmt.Sprintf("%s-%dB", a.name, len(a.args)), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(a.args)))
			var buf []byte
			for b.Loop() {
				var err error
				if buf, err = jcs.AppendCanonical(buf[:0], a.args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
