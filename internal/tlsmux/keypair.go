package tlsmux

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// ReloadEvery is how often a KeyPair checks its files for changes.
const ReloadEvery = 5 * time.Second

// KeyPair is a certificate and key read from PEM files and read again when
// the files change, so a renewed certificate is served without a restart.
// A pair that fails to load keeps the last good one.
type KeyPair struct {
	certFile, keyFile string

	mu      sync.Mutex
	checked time.Time
	mods    [2]time.Time
	cert    *tls.Certificate
}

// LoadKeyPair reads the pair once; it fails when the files cannot be used.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	k := &KeyPair{certFile: certFile, keyFile: keyFile}
	if err := k.reload(true); err != nil {
		return nil, err
	}
	k.checked = time.Now()
	return k, nil
}

func (k *KeyPair) reload(force bool) error {
	var mods [2]time.Time
	for i, f := range []string{k.certFile, k.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return fmt.Errorf("tls key pair: %w", err)
		}
		mods[i] = st.ModTime()
	}
	if !force && mods == k.mods {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return fmt.Errorf("tls key pair %s, %s: %w", k.certFile, k.keyFile, err)
	}
	k.cert, k.mods = &cert, mods
	return nil
}

// Certificate returns the current pair, reloading changed files at most
// every ReloadEvery.
func (k *KeyPair) Certificate() *tls.Certificate {
	k.mu.Lock()
	defer k.mu.Unlock()
	if time.Since(k.checked) >= ReloadEvery {
		k.checked = time.Now()
		_ = k.reload(false)
	}
	return k.cert
}

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
