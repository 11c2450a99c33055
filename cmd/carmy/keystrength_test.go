package main

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"strings"
	"testing"
)

// testClusterKey is the cluster key of the tests that give one: strong
// enough for checkClusterKey.
const testClusterKey = "Tq7-cluster-KEY-for-tests-9fX2"

// TestClusterKeyStrength checks the simple estimate: the weak keys of
// issue 28 (16 repeated letters) and their kin are refused, saying why;
// strong keys of every usual shape pass.
func TestClusterKeyStrength(t *testing.T) {
	for key, want := range map[string]string{
		"aaaaaaaaaaaaaaaa":                    "bits of entropy",
		"0123456789abcdef":                    "bits of entropy", // 16 characters: 83 bits
		"correcthorsebatt":                    "bits of entropy",
		strings.Repeat("a", 64):               "distinct characters",
		strings.Repeat("ab", 40):              "distinct characters",
		strings.Repeat("abcdefgh", 5):         "repeats a string of 8 bytes",
		strings.Repeat("Passw0rd!", 4):        "repeats a string of 9 bytes",
		"aaaaaaaaaabbbbbbbbbbcccccccccc12345": "runs of one character",
	} {
		err := checkClusterKey(key)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkClusterKey(%q) = %v, want an error saying %q", key, err, want)
		}
	}
	for _, key := range []string{
		testClusterKey,
		"testutil-cluster-key-0123456789",              // tests/testutil's
		"0123456789abcdef0123456789abcdeX",             // 32 characters of a bigger alphabet
		hex.EncodeToString([]byte("sixteen bytes!!!")), // 32 hex digits: 165 bits
		"correct horse battery staple of mine",         // a passphrase of 36 characters
		"00188923936274917243529871782875",             // 32 random hex digits, none a letter: 128 bits
	} {
		if err := checkClusterKey(key); err != nil {
			t.Errorf("checkClusterKey(%q) = %v, want nil", key, err)
		}
	}
}

// TestGeneratedKeysAlwaysPass checks that every key carmy keygen (and a
// node without a key) generates passes, over many runs, and 32 random hex
// digits (openssl rand -hex 16) too.
func TestGeneratedKeysAlwaysPass(t *testing.T) {
	for i := range 20000 {
		key, err := newKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkClusterKey(key); err != nil {
			t.Fatalf("generated key %d %q: %v", i, key, err)
		}
		b := make([]byte, 16)
		if _, err := io.ReadFull(rand.Reader, b); err != nil {
			t.Fatal(err)
		}
		if err := checkClusterKey(hex.EncodeToString(b)); err != nil {
			t.Fatalf("random hex key %q: %v", hex.EncodeToString(b), err)
		}
	}
}
