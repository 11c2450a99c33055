package tlsmux

import (
	"crypto/tls"
	"fmt"
	"log/slog"
)

// KeyPair is a certificate and key read from PEM files and read again when
// the files change (Watched), so a renewed certificate is served without a
// restart. A pair that fails to load keeps the last good one.
type KeyPair struct {
	w *Watched[*tls.Certificate]
}

// LoadKeyPair reads the pair once; it fails when the files cannot be used.
// A later reload that fails is logged to log (nil: not logged).
func LoadKeyPair(certFile, keyFile string, log *slog.Logger) (*KeyPair, error) {
	w, err := Watch(log, func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls key pair %s, %s: %w", certFile, keyFile, err)
		}
		return &cert, nil
	}, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &KeyPair{w: w}, nil
}

// Certificate returns the current pair.
func (k *KeyPair) Certificate() *tls.Certificate { return k.w.Current() }

// ServerConfig returns a TLS server configuration (TLS 1.2 or later) that
// serves the current pair.
func (k *KeyPair) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return k.Certificate(), nil
		},
	}
}
