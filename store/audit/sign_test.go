package audit_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store/audit"
	"github.com/carmyhq/carmy/store/jcs"
)

// signedChain is chain with a checkpoint entry, signed by key, after
// every entry of the n: 2n entries.
func signedChain(t *testing.T, key ed25519.PrivateKey, n int) []byte {
	t.Helper()
	var out []byte
	h := audit.Start
	at := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	for i := range n {
		var e audit.Entry
		e, h = h.Next(audit.Draft{Time: at, Kind: audit.KindReserved, ExecutionID: "exec_" + string(rune('a'+i)), Actor: "alice", Status: "running"}, nil)
		out = e.Line(out)
		s := audit.Sign(key, h)
		e, h = h.Next(audit.Draft{Time: at, Kind: audit.KindCheckpoint, Actor: "n1", Checkpoint: &s}, nil)
		out = e.Line(out)
	}
	return out
}

// TestSignedCheckpointsVerify: checkpoint entries are canonical JSON (the
// checkpoint member included), and VerifyWith checks and counts their
// signatures by the public key.
func TestSignedCheckpointsVerify(t *testing.T) {
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	file := signedChain(t, key, 3)
	last := bytes.Split(bytes.TrimSuffix(file, []byte("\n")), []byte("\n"))[5]
	canon, err := jcs.Canonical(last)
	if err != nil || !bytes.Equal(canon, last) {
		t.Fatalf("a checkpoint line is not canonical JSON: %s (%v)", last, err)
	}
	v, err := audit.VerifyWith(bytes.NewReader(file), pub)
	if err != nil || v.Entries != 6 || v.Checkpoints != 3 || v.LastSigned != 5 {
		t.Fatalf("VerifyWith = %+v, %v; want 6 entries, 3 checkpoints, last signed 5", v, err)
	}
	// Without the key the chain verifies, its signatures unchecked.
	if v, err := audit.Verify(bytes.NewReader(file)); err != nil || v.Checkpoints != 0 {
		t.Fatalf("Verify = %+v, %v", v, err)
	}
	// Another key: the first checkpoint is named.
	other, _, _ := ed25519.GenerateKey(nil)
	var bad *audit.BadError
	if _, err := audit.VerifyWith(bytes.NewReader(file), other); !errors.As(err, &bad) || bad.Seq != 2 || !strings.Contains(bad.Reason, "not by the public key") {
		t.Fatalf("another key: %v", err)
	}
}

// TestTamperedSignatureIsNamed: a checkpoint whose signature was changed
// (and its hash recomputed, so the chain alone still verifies) is named by
// its seq.
func TestTamperedSignatureIsNamed(t *testing.T) {
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(signedChain(t, key, 3), []byte("\n"))
	var out []byte
	h := audit.Start
	for i, l := range lines[:4] {
		var e audit.Entry
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		if i == 3 { // seq 4, the second checkpoint, the last line
			// Another hex digit, so the signature still parses and
			// only its check can fail (a bit flip could leave the hex
			// alphabet: 'a'^1 is '`').
			sig := []byte(e.Checkpoint.Signature)
			if sig[0] == '0' {
				sig[0] = '1'
			} else {
				sig[0] = '0'
			}
			e.Checkpoint.Signature = string(sig)
		}
		e, h = h.Next(e, nil)
		out = e.Line(out)
	}
	if _, err := audit.Verify(bytes.NewReader(out)); err != nil {
		t.Fatalf("the re-chained file does not verify as a chain: %v", err)
	}
	v, err := audit.VerifyWith(bytes.NewReader(out), pub)
	var bad *audit.BadError
	if !errors.As(err, &bad) || bad.Seq != 4 || !strings.Contains(bad.Reason, "signature does not verify") {
		t.Fatalf("VerifyWith = %v; want seq 4 named, its signature", err)
	}
	if v.Checkpoints != 1 || v.LastSigned != 1 {
		t.Errorf("verified before it: %+v; want 1 checkpoint, signing seq 1", v)
	}
}

// TestKeysRoundTrip: MarshalKeys writes PEM that ParsePrivateKey and
// ParsePublicKey read back.
func TestKeysRoundTrip(t *testing.T) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	priv, pubPEM, err := audit.MarshalKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	k, err := audit.ParsePrivateKey(priv)
	if err != nil || !k.Equal(key) {
		t.Fatalf("ParsePrivateKey: %v", err)
	}
	p, err := audit.ParsePublicKey(pubPEM)
	if err != nil || !p.Equal(key.Public()) {
		t.Fatalf("ParsePublicKey: %v", err)
	}
	if _, err := audit.ParsePrivateKey(pubPEM); err == nil {
		t.Error("a public key read as a private one")
	}
}
