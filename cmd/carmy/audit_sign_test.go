package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store/audit"
)

// TestAuditKeygenAndVerifyPublicKey: `carmy audit keygen` writes a signing
// key that audit.signing_key reads and prints its public key; `carmy audit
// verify --public-key` says how many checkpoints verified and the last
// seq signed, and names the first checkpoint whose signature is bad.
func TestAuditKeygenAndVerifyPublicKey(t *testing.T) {
	dir := t.TempDir()
	keyFile, pubFile := filepath.Join(dir, "audit.key"), filepath.Join(dir, "audit.pub")
	var pubPEM, errOut bytes.Buffer
	run := func(stdout *bytes.Buffer, args ...string) error {
		stdout.Reset()
		errOut.Reset()
		return auditCmd(context.Background(), args, func(string) string { return "" }, stdout, &errOut)
	}
	if err := run(&pubPEM, "keygen", "--out", keyFile); err != nil {
		t.Fatalf("keygen: %v %s", err, errOut.String())
	}
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v, %v", st, err)
	}
	if err := run(&bytes.Buffer{}, "keygen", "--out", keyFile); err == nil {
		t.Error("keygen overwrote an existing key file")
	}
	if err := os.WriteFile(pubFile, pubPEM.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	key, err := audit.ParsePrivateKey(keyPEM) // as audit.signing_key reads it
	if err != nil {
		t.Fatal(err)
	}

	// A chain with two checkpoints, the second at seq 4.
	var file []byte
	h := audit.Start
	at := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	for i := range 2 {
		var e audit.Entry
		e, h = h.Next(audit.Draft{Time: at, Kind: audit.KindReserved, ExecutionID: "exec_" + string(rune('a'+i)), Actor: "alice"}, nil)
		file = e.Line(file)
		s := audit.Sign(key, h)
		if i == 1 {
			s.Signature = strings.Repeat("0", 128)
		}
		e, h = h.Next(audit.Draft{Time: at, Kind: audit.KindCheckpoint, Actor: "n1", Checkpoint: &s}, nil)
		file = e.Line(file)
	}
	lines := bytes.SplitAfter(file, []byte("\n"))
	good, bad := filepath.Join(dir, "good.ndjson"), filepath.Join(dir, "bad.ndjson")
	if err := os.WriteFile(good, bytes.Join(lines[:2], nil), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, file, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(&out, "verify", good, "--public-key", pubFile); err != nil || !strings.Contains(out.String(), "verified 1 signed checkpoints") ||
		!strings.Contains(out.String(), "the last signs seq 1") {
		t.Fatalf("verify the good file: %v\n%s", err, out.String())
	}
	err = run(&out, "verify", bad, "--public-key", pubFile)
	if err == nil || !strings.Contains(err.Error(), "seq 4 (line 4) does not verify: checkpoint: the signature does not verify") {
		t.Fatalf("verify the bad file: %v", err)
	}
	// Without the key, the chain alone verifies.
	if err := run(&out, "verify", bad); err != nil {
		t.Fatalf("verify without --public-key: %v", err)
	}
}
