package carmy

import (
	"net"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/internal/tlsmux"
)

// withTLS returns the listener the API is served on and its scheme. With
// cfg.TLS or cfg.NodeTLS, one port serves HTTPS (or plain HTTP) to clients
// and mutual TLS to other nodes: the first byte of a connection tells
// which, within handshake (the header read timeout). Without either, ln
// is served as it is, over plain HTTP.
func withTLS(ln net.Listener, cfg api.Config, handshake time.Duration) (net.Listener, string) {
	if cfg.TLS != nil || cfg.NodeTLS != nil {
		ln = tlsmux.New(ln, tlsmux.Config(cfg.TLS, cfg.NodeTLS), handshake)
	}
	if cfg.TLS != nil {
		return ln, "https"
	}
	return ln, "http"
}
