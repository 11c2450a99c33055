package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/tests/testutil"
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
	if !certs.HasNodeRole(leaf) || fmt.Sprint(leaf.URIs) != "[urn:carmy:role:node]" {
		t.Errorf("the node certificate's URIs = %v, want the node role", leaf.URIs)
	}
	// An API certificate: the names given, server auth, no node role.
	if err := tlsCmd([]string{"cert", "--dir", dir, "--role", "api", "--name", "carmy.example.com,10.0.0.9"}, now, &out, &errOut); err != nil {
		t.Fatalf("tls cert --role api: %v (%s)", err, errOut.String())
	}
	apiPair, err := tls.LoadX509KeyPair(filepath.Join(dir, "api.pem"), filepath.Join(dir, "api-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	api, _ := x509.ParseCertificate(apiPair.Certificate[0])
	if certs.HasNodeRole(api) || len(api.URIs) != 0 {
		t.Errorf("the API certificate carries URIs %v, want no node role", api.URIs)
	}
	if got := fmt.Sprint(api.DNSNames, api.IPAddresses); got != "[carmy.example.com] [10.0.0.9]" {
		t.Errorf("API names = %s", got)
	}
	if _, err := api.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, DNSName: "carmy.example.com", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the API certificate does not chain to the CA: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "api-key.pem")); st.Mode().Perm() != 0o600 {
		t.Errorf("the API key is %v, want 0600", st.Mode().Perm())
	}
	for _, args := range [][]string{
		{"cert", "--dir", dir, "--role", "api"},
		{"cert", "--dir", dir, "--role", "api", "--node-id", "n1", "--name", "x"},
		{"cert", "--dir", dir, "--role", "admin", "--node-id", "n1"},
		{"cert", "--dir", dir, "--node-id", "n1", "--name", "x"},
	} {
		if err := tlsCmd(args, now, &out, &errOut); err == nil {
			t.Errorf("tls %q succeeded", args)
		}
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

// TestTLSFilesAndHelp pins what a newcomer and an operator trip on: a CA
// written into a folder that does not exist yet (made 0700), a renewed key
// that stays 0600 even over a looser file, and help that exits 0.
func TestTLSFilesAndHelp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls", "cluster")
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var out, errOut bytes.Buffer
	if err := tlsCmd([]string{"ca", "--dir", dir}, now, &out, &errOut); err != nil {
		t.Fatalf("tls ca into a missing folder: %v (%s)", err, errOut.String())
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the CA folder: %v, %v; want 0700", st.Mode().Perm(), err)
	}
	key := filepath.Join(dir, "n1-key.pem")
	if err := os.WriteFile(key, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tlsCmd([]string{"cert", "--dir", dir, "--node-id", "n1"}, now, &out, &errOut); err != nil {
		t.Fatalf("tls cert: %v (%s)", err, errOut.String())
	}
	st, err := os.Stat(key)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("a key renewed over a 0644 file is %v (%v), want 0600", st.Mode().Perm(), err)
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, "n1.pem"), key); err != nil {
		t.Errorf("the renewed pair: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Errorf("the folder holds %d files, want the CA pair and the node pair (no temporary files)", len(entries))
	}
	for _, args := range [][]string{{"ca", "--help"}, {"cert", "-h"}, {"--help"}} {
		out.Reset()
		if err := tlsCmd(args, now, &out, &errOut); err != nil || !strings.Contains(out.String(), "carmy tls <command>") {
			t.Errorf("tls %q: %v, printed %q; want the usage and exit 0", args, err, out.String())
		}
	}
	out.Reset()
	if err := run(t.Context(), []string{"help", "tls"}, &out, &errOut); err != nil || !strings.Contains(out.String(), "carmy tls <command>") {
		t.Errorf("carmy help tls: %v, printed %q", err, out.String())
	}
}

// TestServeNodeAndAPIOverTLS starts two nodes with node certificates of
// one CA and API certificates: the second joins the first over mutual TLS
// (HTTP and Raft), calls through either node are forwarded and replayed
// over it, clients reach the API over HTTPS only, and `carmy cluster`
// trusts the CA with --ca-file. A third node with a certificate of another
// CA cannot join: its join request fails the handshake.
func TestServeNodeAndAPIOverTLS(t *testing.T) {
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
		// The node certificate names localhost and the loopback IPs, so
		// it serves as the API's certificate here too.
		return []string{"--node-tls-ca", filepath.Join(d, "carmy-ca.pem"),
			"--node-tls-cert", filepath.Join(d, id+".pem"), "--node-tls-key", filepath.Join(d, id+"-key.pem"),
			"--tls-cert", filepath.Join(d, id+".pem"), "--tls-key", filepath.Join(d, id+"-key.pem")}
	}
	caFile := filepath.Join(dir, "carmy-ca.pem")
	tc, err := certs.ClientConfig(caFile)
	if err != nil {
		t.Fatal(err)
	}
	trusting := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	start := func(args ...string) *runningServe {
		t.Helper()
		s := startServe(t, args...)
		if s.scheme != "https" {
			t.Fatalf("a node with --tls-cert serves %s", s.scheme)
		}
		s.client = trusting
		return s
	}
	n1 := start(append([]string{"--dev", "--http-addr", "127.0.0.1:0", "--node-id", "t1"}, tlsArgs(dir, "t1")...)...)
	n1.waitReady(t)
	n2 := start(append([]string{"--dev", "--http-addr", "127.0.0.1:0", "--node-id", "t2", "--join", n1.addr}, tlsArgs(dir, "t2")...)...)
	n2.waitReady(t)
	call := `{"tool":"echo","arguments":{"x":1},"request_id":"over-tls"}`
	code, _, body := n2.post(t, "/v1/tools/call", call)
	if code != 200 {
		t.Fatalf("a call through t2: %d %s", code, body)
	}
	testutil.WaitFor(t, 10*time.Second, "the replay through t1", func() error {
		if code, _, body := n1.post(t, "/v1/tools/call", call); code != 200 || !strings.Contains(body, `"replayed":true`) {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})

	// Plain HTTP to an HTTPS API: the envelope, and nothing else.
	resp, err := testClient.Post("http://"+n1.addr+"/v1/tools/call", "application/json", strings.NewReader(call))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(plain), `"code":"INVALID_REQUEST"`) || !strings.Contains(string(plain), "https") {
		t.Fatalf("plain HTTP to the HTTPS API: %d %s", resp.StatusCode, plain)
	}
	// A client that does not trust the CA fails the handshake.
	if _, err := testClient.Get(n1.url("/healthz")); err == nil {
		t.Fatal("a client without the CA accepted the API's certificate")
	}
	out.Reset()
	if err := clusterCmd(t.Context(), []string{"status", "--addr", n1.url(""), "--ca-file", caFile}, func(string) string { return "" }, &out, &errOut); err != nil {
		t.Fatalf("carmy cluster status over HTTPS: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "t2") {
		t.Fatalf("carmy cluster status does not list t2:\n%s", out.String())
	}

	n3 := startServe(t, append([]string{"--dev", "--http-addr", "127.0.0.1:0", "--node-id", "t3", "--join", n1.addr}, tlsArgs(other, "t3")...)...)
	testutil.WaitUntil(t, 30*time.Second, "t1 to refuse t3's certificate", func() bool {
		logs := n1.logs.String() + n3.logs.String()
		return strings.Contains(logs, "certificate signed by unknown authority") || strings.Contains(logs, "bad certificate")
	})
	code, body = n1.get(t, "/v1/cluster", "")
	if code != 200 || strings.Contains(body, `"t3"`) {
		t.Errorf("t3, with a certificate of another CA, was let into the configuration: %d %s", code, body)
	}
}
