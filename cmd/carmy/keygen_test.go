package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestKeygenMakesAGossipKey(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"keygen"}, &out, &errOut); err != nil {
		t.Fatalf("carmy keygen: %v (%s)", err, errOut.String())
	}
	line := strings.TrimSpace(out.String())
	key, err := base64.StdEncoding.DecodeString(line)
	if err != nil || len(key) != 32 {
		t.Fatalf("carmy keygen printed %q: %d bytes, %v; want 32 bytes of base64", line, len(key), err)
	}
	keys, err := parseGossipKeys(line)
	if err != nil || len(keys) != 1 {
		t.Fatalf("--gossip-key refuses keygen's key: %v", err)
	}
	var again bytes.Buffer
	_ = run(context.Background(), []string{"keygen"}, &again, &errOut)
	if again.String() == out.String() {
		t.Error("two keys from carmy keygen are equal")
	}
	if err := run(context.Background(), []string{"keygen", "extra"}, &out, &errOut); !errors.Is(err, errUsage) {
		t.Errorf("carmy keygen extra = %v, want a usage error", err)
	}
}

func TestGossipKeyFlag(t *testing.T) {
	k32 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	k16 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 16))
	for _, tc := range []struct {
		value string
		keys  int
		ok    bool
	}{
		{"", 0, true},
		{k32, 1, true},
		{k32 + "," + k16, 2, true},
		{" " + k16 + " , " + k32 + " ", 2, true},
		{"not base64!", 0, false},
		{base64.StdEncoding.EncodeToString([]byte("short")), 0, false},
		{k32 + ",", 0, false},
	} {
		keys, err := parseGossipKeys(tc.value)
		if (err == nil) != tc.ok || len(keys) != tc.keys {
			t.Errorf("parseGossipKeys(%q) = %d keys, %v; want %d keys, ok %v", tc.value, len(keys), err, tc.keys, tc.ok)
		}
	}
	// Through the environment too, and a bad key is refused before start.
	env := func(k string) string {
		if k == "CARMY_GOSSIP_KEY" {
			return "bad"
		}
		return ""
	}
	var out bytes.Buffer
	if _, err := parseServe(nil, env, &out); err == nil || !strings.Contains(err.Error(), "--gossip-key") {
		t.Errorf("CARMY_GOSSIP_KEY=bad: %v, want a --gossip-key error", err)
	}
}
