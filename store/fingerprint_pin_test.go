package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/jcs"
)

// pinnedFingerprints are fingerprints computed by the code before the
// JSON scanner was shared (commit decaca0). Records on disk hold
// fingerprints like these, and a retry must still match its record: a
// change to canonicalisation, escaping or hashing that moves any of them
// breaks every stored identity.
var pinnedFingerprints = []struct{ tool, args, meta, want string }{
	{"create_order", "", "", "5370befba438028dcb71378518e7710a068f850e0fb6833831f5692fde897930"},
	{"create_order", "{}", "{}", "5370befba438028dcb71378518e7710a068f850e0fb6833831f5692fde897930"},
	{"create_order", "{\"sku\":\"KB-01\"}", "{\"agent\":\"planner\"}", "12c5965c8e986da8d3fae22166307470b1a770dd040b0f8a8c1ff22fe43f1b47"},
	{"t", "{\"n\":1e21}", "", "d92d671e66f9a17d3f495e5845b423ed93eeedcc61553f3102155e4e27ab8591"},
	{"t", "{\"n\":1.0}", "", "8d0c040485360d601c36249eaba2085957dc87d5710a6c21e763ffc0234f53ad"},
	{"t", "{\"n\":-0}", "", "be2f63a8c02e0699b5024ce438769f0244d25c243994d35b4612b7fe4f868085"},
	{"t", "{\"n\":[0.1,1e-7,123456789012345678,-1.5E+3,0.000001,1e20,5e-324,1.7976931348623157e308]}", "", "80433e3823748cb5d344087c209f8aa9faeeda7c5edef2688eb27b21a1b360e0"},
	{"t", "{\"s\":\"\\u00e9\\u20ac\\ud83d\\ude00\\n\\t\\\"\\\\\\/\\u0001\\u001f<>&\\u2028\"}", "", "9799d0acdb0bb6852a5b6f362f13d40ff66be94a152d30b069c0e1cc306feb12"},
	{"t", "{\"b\":{\"z\":1,\"a\":[{\"y\":true,\"x\":null}],\"é\":2,\"e\":3,\"\\ud83d\\ude00\":4,\"\\uffff\":5}}", "{\"z\":\"1\",\"a\":{\"c\":false,\"b\":[]}}", "9c72a24b994c89f5a536ddbfc3e1f4b0a366108a6c292ce32ea02021b984b38a"},
	{"t", " { \"a\" : [ 1 , 2 ] ,\n\"B\":\"x\" } ", " {\"k\" : \"v\"} ", "a6e5668110535ddc63d4fe924657d02baf299884823b2bfc01313ea45e07fe94"},
	{"tool with \"quote\" and é", "{\"a\":1}", "", "492ceac1e51aa6fe01f961221bc5df62cdbc66e8025cfcda3b16b738787c2698"},
	{"ctl\x01<tool>", "{}", "{}", "4d43f8d585b74f3d954d525844f9cc6ed27bedf297104ff5eaf06148bec01129"},
	{"t", "{\"big\":12345678901234567890,\"neg\":-12345678901234567890,\"frac\":3.14159265358979323846}", "", "dac1a0bd2a9e8424a9fbbfae9297b7acad40c53ad00b9fd1a43906d7295cf5f7"},
	// Over 512 bytes: FingerprintCanonical hashes them where they are.
	{"search", `{"z":[1,2.5,1e21,{"b":"\u00e9","a":null}],"k":"` + strings.Repeat("carmy ", 100) + `"}`, `{"m":1}`, "76bf22f5e810f2fd548e41d80f62b9f95e47ea7696c5953b12f65980ae77b19e"},
}

// TestFingerprintPinned holds Fingerprint to the fingerprints earlier
// builds computed and stored.
func TestFingerprintPinned(t *testing.T) {
	for _, c := range pinnedFingerprints {
		got, err := store.Fingerprint(c.tool, json.RawMessage(c.args), json.RawMessage(c.meta))
		if err != nil {
			t.Fatalf("Fingerprint(%q, %q, %q): %v", c.tool, c.args, c.meta, err)
		}
		if got != c.want {
			t.Errorf("Fingerprint(%q, %q, %q) = %s, pinned %s", c.tool, c.args, c.meta, got, c.want)
		}
	}
}

// TestFingerprintCanonicalMatches holds FingerprintCanonical, given the
// canonical forms of the arguments and metadata, to the same pinned
// fingerprints as Fingerprint.
func TestFingerprintCanonicalMatches(t *testing.T) {
	for _, c := range pinnedFingerprints {
		var args, meta []byte
		var err error
		if c.args != "" {
			if args, err = jcs.Canonical([]byte(c.args)); err != nil {
				t.Fatal(err)
			}
		}
		if c.meta != "" {
			if meta, err = jcs.Canonical([]byte(c.meta)); err != nil {
				t.Fatal(err)
			}
		}
		got, err := store.FingerprintCanonical(c.tool, args, meta)
		if err != nil {
			t.Fatalf("FingerprintCanonical(%q, %q, %q): %v", c.tool, args, meta, err)
		}
		if got != c.want {
			t.Errorf("FingerprintCanonical(%q, %q, %q) = %s, pinned %s", c.tool, args, meta, got, c.want)
		}
	}
	// Not an object: refused as Fingerprint refuses it, naming the field.
	for _, c := range []struct{ args, meta, field string }{{"[]", "", "arguments"}, {"{}", "1", "metadata"}} {
		_, err := store.FingerprintCanonical("t", []byte(c.args), []byte(c.meta))
		var fe *store.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, store.ErrInvalid) {
			t.Errorf("FingerprintCanonical(%q, %q) = %v, want an invalid %s", c.args, c.meta, err, c.field)
		}
	}
}
