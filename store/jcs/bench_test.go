package jcs_test

import (
	"testing"

	"github.com/carmyhq/carmy/store/jcs"
)

// benchInput is a roughly 1 KiB object typical of a stored record.
var benchInput = []byte(`{
  "id": "f3b1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
  "type": "vehicle.service.record",
  "version": 3,
  "created": "2024-05-17T09:32:11.123Z",
  "owner": {"name": "Zoë Müller", "email": "zoe@example.com", "verified": true, "tier": null},
  "vehicle": {
    "vin": "WVWZZZ1JZXW000001", "make": "Volkswagen", "model": "Golf",
    "year": 2019, "odometer_km": 84213.5, "fuel": "petrol",
    "tags": ["daily", "city", "family", "\u20ac-budget"]
  },
  "services": [
    {"date": "2023-03-02", "km": 60120, "cost": 249.90, "items": ["oil", "filter"], "note": "routine"},
    {"date": "2023-11-20", "km": 72450, "cost": 1.2e3, "items": ["brakes", "discs"], "note": "front axle\nreplaced"},
    {"date": "2024-04-09", "km": 83990, "cost": 99.5, "items": ["tyres"], "note": "winter \u2192 summer"}
  ],
  "flags": {"recall": false, "warranty": true, "imported": false},
  "scores": [0.1, 0.25, 0.333333333333333314829616256247, 1E-7, 12345678901234567890],
  "meta": {"source": "api/v2", "checksum": "9b74c9897bac770ffc029102a200c5de", "retries": 0,
           "emoji": "\ud83d\ude97", "path": "C:\\cars\\golf"}
}`)

func BenchmarkCanonicalize(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchInput)))
	for b.Loop() {
		if _, err := jcs.AppendCanonical(nil, benchInput); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendCanonical(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchInput)))
	var buf []byte
	for b.Loop() {
		var err error
		if buf, err = jcs.AppendCanonical(buf[:0], benchInput); err != nil {
			b.Fatal(err)
		}
	}
}
