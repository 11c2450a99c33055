package tlsmux

import (
	"bytes"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/certs"
)

// TestKeyPairReloads checks that a renewed certificate is served without
// a restart, and that a broken file keeps the last good pair.
func TestKeyPairReloads(t *testing.T) {
	now := time.Now()
	caPEM, caKey, err := certs.NewCA("test CA", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "api.pem"), filepath.Join(dir, "api-key.pem")
	write := func(id string, at time.Time) {
		t.Helper()
		c, k, err := certs.NewNodeCert(caPEM, caKey, id, nil, nil, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		for f, b := range map[string][]byte{certFile: c, keyFile: k} {
			if err := os.WriteFile(f, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(f, at, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	serving := func(kp *KeyPair) string {
		t.Helper()
		leaf, err := x509.ParseCertificate(kp.Certificate().Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName
	}
	write("first", now)
	var logs bytes.Buffer // written by Current, on this goroutine
	kp, err := LoadKeyPair(certFile, keyFile, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := serving(kp); got != "first" {
		t.Fatalf("serving %q", got)
	}
	write("renewed", now.Add(time.Minute))
	kp.w.Expire() // as if ReloadEvery had passed
	if got := serving(kp); got != "renewed" {
		t.Fatalf("after renewal serving %q, want renewed", got)
	}
	if err := os.WriteFile(certFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := now.Add(2 * time.Minute)
	_ = os.Chtimes(certFile, later, later)
	kp.w.Expire()
	if got := serving(kp); got != "renewed" {
		t.Fatalf("a broken file: serving %q, want the last good pair", got)
	}
	// The failure is logged once, not at every check of the same files.
	kp.w.Expire()
	serving(kp)
	if n := strings.Count(logs.String(), "reloading TLS files failed"); n != 1 || !strings.Contains(logs.String(), certFile) {
		t.Fatalf("%d warnings of the broken file, want 1 naming it:\n%s", n, logs.String())
	}
	if _, err := LoadKeyPair(certFile, keyFile, nil); err == nil {
		t.Fatal("LoadKeyPair took a broken certificate file")
	}
	// Within ReloadEvery, files are not looked at.
	write("too-soon", now.Add(3*time.Minute))
	if got := serving(kp); got != "renewed" {
		t.Fatalf("reloaded within ReloadEvery: serving %q", got)
	}
}
