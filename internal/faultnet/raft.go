package faultnet

import (
	"context"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// StreamLayer returns s, a Raft stream layer (for
// raft.NewNetworkTransportWithLogger), with the Filter's rules applied:
// Accept filters s's accepted connections as Listener does, and Dial goes
// through DialContext around s's own Dial. Addr and Close are s's.
func (f *Filter) StreamLayer(s raft.StreamLayer) raft.StreamLayer {
	return &streamLayer{Listener: f.Listener(s), inner: s, f: f}
}

type streamLayer struct {
	net.Listener // s, filtered
	inner        raft.StreamLayer
	f            *Filter
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
	return s.f.dial(ctx, func(ctx context.Context, _, addr string) (net.Conn, error) {
		left := timeout
		if d, ok := ctx.Deadline(); ok {
			if left = time.Until(d); left <= 0 {
				return nil, context.DeadlineExceeded
			}
		}
		return s.inner.Dial(raft.ServerAddress(addr), left)
	}, "tcp", string(address))
}

// Addr returns the address s advertises to its Raft peers.
func (s *streamLayer) Addr() net.Addr { return s.inner.Addr() }
