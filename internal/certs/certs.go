// Package certs makes the cluster CA and node certificates of Carmy's
// mutual TLS between nodes (carmy tls ca, carmy tls cert): ECDSA P-256
// keys, PEM files; and the TLS configuration of the client commands
// (ClientConfig: the system roots plus a --ca-file).
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"
)

// NodeRoleURI is the URI SAN that makes a certificate of the cluster's CA
// a node's: nodes refuse, on Raft and on the peer (node-to-node) endpoints, a peer
// whose certificate lacks it (an API server's certificate of the same CA,
// say).
const NodeRoleURI = "urn:carmy:role:node"

// HasNodeRole reports whether cert carries NodeRoleURI.
func HasNodeRole(cert *x509.Certificate) bool {
	for _, u := range cert.URIs {
		if u.String() == NodeRoleURI {
			return true
		}
	}
	return false
}

// Default lifetimes: a CA for 5 years, a node certificate for 1 year.
const (
	CALifetime   = 5 * 365 * 24 * time.Hour
	NodeLifetime = 365 * 24 * time.Hour
)

// NewCA returns a self-signed CA certificate and its key, in PEM.
func NewCA(commonName string, lifetime time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Carmy"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	return encode(der, key)
}

// NewNodeCert returns a certificate for nodeID signed by the CA, for
// both ends of a connection (server and client auth), with the node role
// (NodeRoleURI), and its key, in PEM. Its names are nodeID, localhost, 127.0.0.1 and ::1, and the given
// DNS names and IPs.
func NewNodeCert(caCertPEM, caKeyPEM []byte, nodeID string, dnsNames []string, ips []net.IP, lifetime time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	if nodeID == "" {
		return nil, nil, errors.New("certs: empty node id")
	}
	return issue(caCertPEM, caKeyPEM, "node", &x509.Certificate{
		Subject:     pkix.Name{CommonName: nodeID, Organization: []string{"Carmy"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    append([]string{nodeID, "localhost"}, dnsNames...),
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...),
		URIs:        []*url.URL{nodeRole()},
	}, lifetime, now)
}

// issue signs tmpl (its names, usages and role) with the CA for a new P-256
// key: a serial, a validity from a minute before now for lifetime (cut to
// the CA's own), digital-signature key usage. what names the certificate
// in errors.
func issue(caCertPEM, caKeyPEM []byte, what string, tmpl *x509.Certificate, lifetime time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	ca, caKey, err := parseCA(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %s key: %w", what, err)
	}
	if now.Add(lifetime).After(ca.NotAfter) {
		lifetime = ca.NotAfter.Sub(now)
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Minute), now.Add(lifetime)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %s certificate: %w", what, err)
	}
	return encode(der, key)
}

func nodeRole() *url.URL {
	u, err := url.Parse(NodeRoleURI)
	if err != nil {
		panic(err)
	}
	return u
}

// NewAPICert returns a server certificate for an API (carmy serve
// --tls-cert) signed by the CA, and its key, in PEM: server auth only,
// without the node role, so that it cannot serve as a node's. Its names
// are the given DNS names and IPs (at least one).
func NewAPICert(caCertPEM, caKeyPEM []byte, dnsNames []string, ips []net.IP, lifetime time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	if len(dnsNames) == 0 && len(ips) == 0 {
		return nil, nil, errors.New("certs: an API certificate needs at least one name")
	}
	cn := ""
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	} else {
		cn = ips[0].String()
	}
	return issue(caCertPEM, caKeyPEM, "API", &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"Carmy"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}, lifetime, now)
}

func parseCA(certPEM, keyPEM []byte) (*x509.Certificate, any, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, errors.New("certs: the CA certificate is not PEM")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: the CA certificate: %w", err)
	}
	if !ca.IsCA {
		return nil, nil, errors.New("certs: the CA certificate is not a CA")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, errors.New("certs: the CA key is not PEM")
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: the CA key: %w", err)
	}
	return ca, key, nil
}

func encode(der []byte, key *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
