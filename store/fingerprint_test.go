package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/carmyhq/carmy/store"
)

func fp(t *testing.T, tool, args, meta string) string {
	t.Helper()
	got, err := store.Fingerprint(tool, json.RawMessage(args), json.RawMessage(meta))
	if err != nil {
		t.Fatalf("Fingerprint(%q, %s, %s): %v", tool, args, meta, err)
	}
	return got
}

func TestFingerprintIsSHA256OfCanonicalJSON(t *testing.T) {
	canonical := `{"arguments":{"a":1,"b":[true,null]},"metadata":{"agent":"planner"},"tool":"create_order"}`
	sum := sha256.Sum256([]byte(canonical))
	want := hex.EncodeToString(sum[:])
	got := fp(t, "create_order", `{ "b" : [true, null], "a" : 1.0 }`, `{"agent":"planner"}`)
	if got != want {
		t.Fatalf("fingerprint = %s, want %s (sha256 of %s)", got, want, canonical)
	}
}

func TestFingerprintIgnoresSpelling(t *testing.T) {
	base := fp(t, "t", `{"sku":"KB-01","qty":1,"opts":{"x":1.5,"y":[1,2]}}`, `{"agent":"a"}`)
	same := []struct{ name, args, meta string }{
		{"key order", `{"qty":1,"opts":{"y":[1,2],"x":1.5},"sku":"KB-01"}`, `{"agent":"a"}`},
		{"white space", "{\n  \"sku\" : \"KB-01\",\t\"qty\":1 , \"opts\":{ \"x\":1.5,\"y\":[ 1 , 2 ] } }", ` { "agent" : "a" } `},
		{"1 vs 1.0", `{"sku":"KB-01","qty":1.0,"opts":{"x":1.50,"y":[1e0,2.0]}}`, `{"agent":"a"}`},
		{"exponent", `{"sku":"KB-01","qty":10e-1,"opts":{"x":15e-1,"y":[0.1e1,2]}}`, `{"agent":"a"}`},
		{"string escapes", `{"sku":"K\u0042-01","qty":1,"opts":{"x":1.5,"y":[1,2]}}`, `{"agent":"\u0061"}`},
	}
	for _, c := range same {
		if got := fp(t, "t", c.args, c.meta); got != base {
			t.Errorf("%s changed the fingerprint", c.name)
		}
	}
}

func TestFingerprintAbsentIsEmptyObject(t *testing.T) {
	if fp(t, "t", ``, ``) != fp(t, "t", `{}`, `{ }`) {
		t.Fatal("absent arguments and metadata differ from {}")
	}
}

func TestFingerprintChangesWithAnyValue(t *testing.T) {
	base := fp(t, "t", `{"sku":"KB-01","qty":1}`, `{"agent":"a"}`)
	differ := []struct{ name, tool, args, meta string }{
		{"tool", "u", `{"sku":"KB-01","qty":1}`, `{"agent":"a"}`},
		{"string value", "t", `{"sku":"KB-02","qty":1}`, `{"agent":"a"}`},
		{"number value", "t", `{"sku":"KB-01","qty":2}`, `{"agent":"a"}`},
		{"number type", "t", `{"sku":"KB-01","qty":"1"}`, `{"agent":"a"}`},
		{"key name", "t", `{"SKU":"KB-01","qty":1}`, `{"agent":"a"}`},
		{"extra key", "t", `{"sku":"KB-01","qty":1,"x":null}`, `{"agent":"a"}`},
		{"metadata", "t", `{"sku":"KB-01","qty":1}`, `{"agent":"b"}`},
		{"arguments moved to metadata", "t", `{}`, `{"sku":"KB-01","qty":1,"agent":"a"}`},
	}
	seen := map[string]string{base: "base"}
	for _, c := range differ {
		got := fp(t, c.tool, c.args, c.meta)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s gives the same fingerprint as %s", c.name, prev)
		}
		seen[got] = c.name
	}
}

func TestFingerprintRejectsBadInput(t *testing.T) {
	cases := []struct{ name, args, meta, field string }{
		{"array arguments", `[1]`, `{}`, "arguments"},
		{"string arguments", `"x"`, `{}`, "arguments"},
		{"null metadata", `{}`, `null`, "metadata"},
		{"duplicate key", `{"a":1,"a":2}`, `{}`, "arguments"},
		{"number out of range", `{"a":1e400}`, `{}`, "arguments"},
		{"malformed", `{"a":}`, `{}`, "arguments"},
		{"malformed metadata", `{}`, `{"a"`, "metadata"},
	}
	for _, c := range cases {
		_, err := store.Fingerprint("t", json.RawMessage(c.args), json.RawMessage(c.meta))
		var fe *store.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: err = %v, want a FieldError on %s", c.name, err, c.field)
		}
	}
}

func BenchmarkFingerprint(b *testing.B) {
	args := json.RawMessage(`{"sku":"KB-01","qty":3,"address":{"street":"1 Main St","city":"Springfield","zip":"12345"},"notes":"leave at the door","tags":["a","b","c"]}`)
	meta := json.RawMessage(`{"agent":"planner","trace":"abc123"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := store.Fingerprint("create_order", args, meta); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFingerprintToolNames covers tool names written as they are (plain
// ASCII) and those encoded and canonicalised: the canonical JSON string of
// the name either way.
func TestFingerprintToolNames(t *testing.T) {
	for tool, str := range map[string]string{
		"create_order":  `"create_order"`,
		"a<b>&c ~/!":    `"a<b>&c ~/!"`,
		`q"b\s`:         `"q\"b\\s"`,
		"tab\there":     `"tab\there"`,
		"del\x7f":       "\"del\x7f\"",
		"zoë€😀":         `"zoë€😀"`,
		"line\u2028sep": "\"line\u2028sep\"",
	} {
		canonical := `{"arguments":{},"metadata":{},"tool":` + str + `}`
		sum := sha256.Sum256([]byte(canonical))
		if got, want := fp(t, tool, ``, ``), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("tool %q: fingerprint %s, want %s (sha256 of %s)", tool, got, want, canonical)
		}
	}
}
