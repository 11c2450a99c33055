package api

import (
	"testing"

	"github.com/carmyhq/carmy/store"
)

// FuzzDecodeCallCanonical checks that the canonical forms decodeCall
// keeps for the fingerprint give the fingerprint store.Fingerprint
// computes from the arguments and metadata themselves.
func FuzzDecodeCallCanonical(f *testing.F) {
	for _, body := range callSeeds {
		f.Add([]byte(body))
	}
	f.Add([]byte(`{"tool":"t","arguments":{"n":1e21,"m":1.0,"z":-0,"s":"\u00e9","b":{"y":1,"x":2}},"metadata":{ "k" : "v" }}`))
	f.Add([]byte(`{"tool":"t","arguments":{"a":1},"metadata":null}`))
	f.Add([]byte(`{"tool":"t","arguments":{"a":"\u0041"},"tool2":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeCall(body, "")
		if err != nil {
			return
		}
		want, wantErr := store.Fingerprint(req.Tool, req.Arguments, req.Metadata)
		if req.CanonicalArguments == nil {
			t.Fatalf("body %q: accepted without canonical arguments", body)
		}
		got, gotErr := store.FingerprintCanonical(req.Tool, req.CanonicalArguments, req.CanonicalMetadata)
		if (wantErr == nil) != (gotErr == nil) || got != want {
			t.Fatalf("body %q: fingerprint of the canonical forms %s, %v; of the arguments %s, %v", body, got, gotErr, want, wantErr)
		}
	})
}
