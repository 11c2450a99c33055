package nodeauth

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/certs"
)

// TestNodeTLSReloadsRenewedFiles checks that a certificate written over
// the old one is used without a restart, and that files that stop making
// sense keep the last good material.
func TestNodeTLSReloadsRenewedFiles(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	caPEM, caKey, err := certs.NewCA("ca", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	files := Files{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "n1.pem"), KeyFile: filepath.Join(dir, "n1-key.pem")}
	issue := func(at time.Time) []byte {
		c, k, err := certs.NewNodeCert(caPEM, caKey, "n1", nil, nil, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		for path, b := range map[string][]byte{files.CAFile: caPEM, files.CertFile: c, files.KeyFile: k} {
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, at, at); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	issue(now.Add(-time.Hour))
	nt, err := LoadTLS(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := nt.current()

	issue(now)    // renewed in place, newer files
	nt.w.Expire() // as if tlsmux.ReloadEvery had passed
	renewed, _ := nt.current()
	if bytes.Equal(renewed.Certificate[0], first.Certificate[0]) {
		t.Fatal("the renewed certificate was not picked up")
	}

	// A broken key keeps the last good pair.
	if err := os.WriteFile(files.KeyFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(files.KeyFile, now.Add(time.Minute), now.Add(time.Minute))
	nt.w.Expire()
	if kept, _ := nt.current(); !bytes.Equal(kept.Certificate[0], renewed.Certificate[0]) {
		t.Error("a broken key replaced the working certificate")
	}
}
