package faultnet

import (
	"context"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// StreamLayer returns a raft.StreamLayer over ln, for
// raft.NewNetworkTransportWithLogger, with the Filter's rules applied:
// Accept is Listener's, Dial is a TCP dial through DialContext. Addr is
// advertise, or ln's address when advertise is nil. Close closes ln.
func (f *Filter) StreamLayer(ln net.Listener, advertise net.Addr) raft.StreamLayer {
	return &streamLayer{Listener: f.Listener(ln), f: f, advertise: advertise}
}

type streamLayer struct {
	net.Listener
	f         *Filter
	advertise net.Addr
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// Dial connects to a Raft peer within timeout (none when not positive).
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var d net.Dialer
	return s.f.dial(ctx, d.DialContext, "tcp", string(address))
}

// Addr returns the address this node advertises to its Raft peers.
func (s *streamLayer) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.Listener.Addr()
}
