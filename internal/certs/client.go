package certs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// EnvCAFile names the CA file the client commands (carmy cluster, carmy
// health, carmy bench) trust for https:// addresses, in addition to the
// system's.
const EnvCAFile = "CARMY_CA_FILE"

// ClientConfig returns the TLS configuration of a client command: the
// system roots plus caFile's certificates when it is given (a private CA
// that signed the nodes' API certificates). It is nil when caFile is
// empty. Its errors name the --ca-file flag.
func ClientConfig(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
}
