package faultnet

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Memberlist returns t (memberlist's NetTransport, made with
// memberlist.NewNetTransport) with the Filter's rules applied, for
// memberlist.Config.Transport:
//   - WriteTo and WriteToAddress drop a packet to a peer in DropOut
//     silently, reporting it sent;
//   - DialTimeout and DialAddressTimeout to a peer in DropOut fail at once
//     (ErrBlocked), and the connections they make are tracked;
//   - PacketCh leaves out packets from a peer in DropIn;
//   - StreamCh closes connections from a peer in DropIn and tracks the
//     others.
//
// The returned transport owns t and goroutines that forward t's packets
// and connections: its Shutdown shuts t down and ends them. Memberlist
// shuts its transport down; a caller that never hands it to memberlist
// must call Shutdown itself.
func (f *Filter) Memberlist(t memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
	g := &gossipTransport{
		inner:     t,
		f:         f,
		packets:   make(chan *memberlist.Packet),
		streams:   make(chan net.Conn),
		stopping:  make(chan struct{}),
		innerDone: make(chan struct{}),
	}
	g.wg.Add(2)
	go g.forwardPackets()
	go g.forwardStreams()
	return g
}

type gossipTransport struct {
	inner   memberlist.NodeAwareTransport
	f       *Filter
	packets chan *memberlist.Packet
	streams chan net.Conn
	// stopping closes when Shutdown begins: from then on the forwarders
	// drop what memberlist no longer reads rather than block.
	stopping chan struct{}
	// innerDone closes once inner is shut down: the forwarders return.
	innerDone chan struct{}
	wg        sync.WaitGroup
	once      sync.Once
	err       error
}

var _ memberlist.NodeAwareTransport = (*gossipTransport)(nil)

// FinalAdvertiseAddr is the inner transport's.
func (g *gossipTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return g.inner.FinalAdvertiseAddr(ip, port)
}

// WriteTo sends a packet unless the rules drop it.
func (g *gossipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return g.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress sends a packet unless the rules drop it.
func (g *gossipTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if g.f.destBlocked(context.Background(), a.Addr) {
		return time.Now(), nil
	}
	return g.inner.WriteToAddress(b, a)
}

// PacketCh delivers the packets the rules let in.
func (g *gossipTransport) PacketCh() <-chan *memberlist.Packet { return g.packets }

// DialTimeout connects to a peer unless the rules forbid it.
func (g *gossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return g.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout connects to a peer unless the rules forbid it.
func (g *gossipTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	next := func(context.Context, string, string) (net.Conn, error) {
		return g.inner.DialAddressTimeout(a, timeout)
	}
	return g.f.dial(ctx, next, "tcp", a.Addr)
}

// StreamCh delivers the connections the rules let in.
func (g *gossipTransport) StreamCh() <-chan net.Conn { return g.streams }

// Shutdown shuts the inner transport down and ends the forwarders. It is
// safe to call more than once.
func (g *gossipTransport) Shutdown() error {
	g.once.Do(func() {
		close(g.stopping)
		// The forwarders keep draining the inner channels meanwhile, so
		// that the inner listeners, blocked on a send, can end.
		g.err = g.inner.Shutdown()
		close(g.innerDone)
		g.wg.Wait()
	})
	return g.err
}

func (g *gossipTransport) forwardPackets() {
	defer g.wg.Done()
	in := g.inner.PacketCh()
	for {
		select {
		case p := <-in:
			if ip, ok := addrIP(p.From); ok && !g.f.receiveAllowed(ip) {
				continue
			}
			select {
			case g.packets <- p:
			case <-g.stopping:
			}
		case <-g.innerDone:
			return
		}
	}
}

func (g *gossipTransport) forwardStreams() {
	defer g.wg.Done()
	in := g.inner.StreamCh()
	for {
		select {
		case nc := <-in:
			c, ok := g.f.admit(nc, accepted)
			if !ok {
				continue
			}
			select {
			case g.streams <- c:
			case <-g.stopping:
				_ = c.Close()
			}
		case <-g.innerDone:
			return
		}
	}
}
