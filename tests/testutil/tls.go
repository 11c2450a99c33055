package testutil

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/certs"
)

// TestTLS reports whether CARMY_TEST_TLS asks every node a test starts to
// run with node TLS, so that the suites run over mutual TLS as well.
func TestTLS() bool { return os.Getenv("CARMY_TEST_TLS") != "" }

// testCA is one CA for the whole test binary: nodes of any test trust
// each other, as nodes of one cluster do.
var testCA struct {
	once     sync.Once
	pem, key []byte
	err      error
}

// nodeTLSArgs writes the CA and a certificate for nodeID into dir and
// returns the --node-tls-* flags that use them.
func nodeTLSArgs(tb testing.TB, dir, nodeID string) []string {
	tb.Helper()
	testCA.once.Do(func() {
		testCA.pem, testCA.key, testCA.err = certs.NewCA("carmy test CA", 24*time.Hour, time.Now())
	})
	if testCA.err != nil {
		tb.Fatal(testCA.err)
	}
	cert, key, err := certs.NewNodeCert(testCA.pem, testCA.key, nodeID, nil, nil, 24*time.Hour, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	files := map[string][]byte{"test-ca.pem": testCA.pem, nodeID + ".pem": cert, nodeID + "-key.pem": key}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return []string{"--node-tls-ca", filepath.Join(dir, "test-ca.pem"),
		"--node-tls-cert", filepath.Join(dir, nodeID+".pem"), "--node-tls-key", filepath.Join(dir, nodeID+"-key.pem")}
}
