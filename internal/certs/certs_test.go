package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"
	"time"
)

func TestNodeCertChainsToItsCA(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	caPEM, caKey, err := NewCA("ca", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := NewNodeCert(caPEM, caKey, "n1", []string{"n1.internal"}, []net.IP{net.ParseIP("10.0.0.1")}, 2*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("the certificate and key do not pair: %v", err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{u}, DNSName: "n1.internal"}); err != nil {
			t.Errorf("usage %v: %v", u, err)
		}
	}
	if !leaf.NotAfter.Equal(now.Add(time.Hour)) {
		t.Errorf("a node certificate outlives its CA: %v, CA until %v", leaf.NotAfter, now.Add(time.Hour))
	}
	other, _, _ := NewCA("other", time.Hour, now)
	otherPool := x509.NewCertPool()
	otherPool.AppendCertsFromPEM(other)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: otherPool, CurrentTime: now}); err == nil {
		t.Error("the certificate chains to another CA")
	}
}

func TestNewNodeCertRefusesBadInput(t *testing.T) {
	now := time.Now()
	caPEM, caKey, _ := NewCA("ca", time.Hour, now)
	node, nodeKey, _ := NewNodeCert(caPEM, caKey, "n1", nil, nil, time.Hour, now)
	for name, tc := range map[string]struct{ ca, key []byte }{
		"not PEM":      {[]byte("x"), caKey},
		"a node as CA": {node, nodeKey},
		"no key":       {caPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("x")})},
	} {
		if _, _, err := NewNodeCert(tc.ca, tc.key, "n2", nil, nil, time.Hour, now); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, _, err := NewNodeCert(caPEM, caKey, "", nil, nil, time.Hour, now); err == nil {
		t.Error("an empty node id was accepted")
	}
}
