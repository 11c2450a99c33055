package tlsmux

import (
	"crypto/tls"
	"errors"
)

// errNoCertificate refuses a TLS client on an address whose API is plain
// HTTP.
var errNoCertificate = errors.New("tlsmux: this address serves plain HTTP: the API has no certificate")

// Config returns the TLS configuration of a Listener: a handshake naming
// NodeServerName gets node (mutual TLS between nodes), any other gets
// client (HTTPS for API clients). Either may be nil; a handshake that
// would need a nil one fails.
func Config(client, node *tls.Config) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if hello.ServerName == NodeServerName && node != nil {
				return node, nil
			}
			if client == nil {
				return nil, errNoCertificate
			}
			return client, nil
		},
	}
}
