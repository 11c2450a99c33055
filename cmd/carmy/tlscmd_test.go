package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTLSCommands(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var out, errOut bytes.Buffer
	if err := tlsCmd([]string{"ca", "--dir", dir}, now, &out, &errOut); err != nil {
		t.Fatalf("tls ca: %v (%s)", err, errOut.String())
	}
	if err := tlsCmd([]string{"ca", "--dir", dir}, now, &out, &errOut); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second tls ca over the first: %v, want a refusal", err)
	}
	if err := tlsCmd([]string{"cert", "--dir", dir, "--node-id", "n1", "--ip", "10.0.0.1", "--dns", "n1.carmy.internal"}, now, &out, &errOut); err != nil {
		t.Fatalf("tls cert: %v (%s)", err, errOut.String())
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	caPEM, _ := os.ReadFile(filepath.Join(dir, "carmy-ca.pem"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("the node certificate does not chain to the CA for %v: %v", usage, err)
		}
	}
	if got := fmt.Sprint(leaf.DNSNames, leaf.IPAddresses); got != "[n1 localhost n1.carmy.internal] [127.0.0.1 ::1 10.0.0.1]" {
		t.Errorf("names = %s", got)
	}
	if d := leaf.NotAfter.Sub(now); d < 364*24*time.Hour || d > 366*24*time.Hour {
		t.Errorf("a node certificate lives %s, want a year", d)
	}
	if st, _ := os.Stat(filepath.Join(dir, "n1-key.pem")); st.Mode().Perm() != 0o600 {
		t.Errorf("the key is %v, want 0600", st.Mode().Perm())
	}
	for _, args := range [][]string{{"cert", "--dir", dir}, {"cert", "--dir", dir, "--node-id", "n2", "--ip", "nope"}, {"bogus"}, {}} {
		if err := tlsCmd(args, now, &out, &errOut); err == nil {
			t.Errorf("tls %q succeeded", args)
		}
	}
	if err := tlsCmd([]string{"cert", "--dir", t.TempDir(), "--node-id", "n3"}, now, &out, &errOut); err == nil || errors.Is(err, errUsage) {
		t.Errorf("tls cert without a CA: %v, want an error naming the CA", err)
	}
}

// TestServeRaftOverTLS starts two nodes with certificates of one CA: the
// second joins the first over mutual TLS and the cluster takes writes; a
// third node with a certificate of another CA cannot join Raft.
func TestServeRaftOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	clearCarmyEnv(t)
	dir, other := t.TempDir(), t.TempDir()
	now := time.Now()
	var out, errOut bytes.Buffer
	for _, args := range [][]string{
		{"ca", "--dir", dir}, {"cert", "--dir", dir, "--node-id", "t1"}, {"cert", "--dir", dir, "--node-id", "t2"},
		{"ca", "--dir", other}, {"cert", "--dir", other, "--node-id", "t3"},
	} {
		if err := tlsCmd(args, now, &out, &errOut); err != nil {
			t.Fatalf("tls %v: %v", args, err)
		}
	}
	tlsArgs := func(d, id string) []string {
		return []string{"--node-tls-ca", filepath.Join(d, "carmy-ca.pem"),
			"--node-tls-cert", filepath.Join(d, id+".pem"), "--node-tls-key", filepath.Join(d, id+"-key.pem")}
	}
	n1 := startServe(t, append([]string{"--dev", "--http-addr", "127.0.0.1:0", "--node-id", "t1"}, tlsArgs(dir, "t1")...)...)
	n1.waitReady(t)
	n2 := startServe(t, append([]string{"--dev", "--http-addr", "127.0.0.1:0", "--node-id", "t2", "--join", n1.addr}, tlsArgs(dir, "t2")...)...)
	n2.waitReady(t)
	code, _, body := n2.post(t, "/v1/tools/call", `{"tool":"echo","arguments":{"x":1},"request_id":"over-tls"}`)
	if code != 200 {
		t.Fatalf("a call through t2: %d %s", code, body)
	}
	n3 := startServe(t, append([]string{"--dev", "--http-addr", "127.0.0.1:0", "--node-id", "t3", "--join", n1.addr}, tlsArgs(other, "t3")...)...)
	// t3 is added to the configuration (the join goes through HTTP) but
	// the leader cannot replicate to it: the handshake fails both ways.
	waitFor(t, 30*time.Second, "t1 to refuse t3's certificate", func() (bool, string) {
		logs := n1.logs.String() + n3.logs.String()
		return strings.Contains(logs, "certificate signed by unknown authority") || strings.Contains(logs, "bad certificate"), ""
	})
	if code, _ := n3.get(t, "/readyz", ""); code == 200 {
		t.Errorf("t3, with a certificate of another CA, is ready: it caught up with a cluster it cannot talk to")
	}
}
