package faultnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
)

// DialFunc dials like net.Dialer.DialContext.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// conn is a connection the Filter tracks until it is closed.
type conn struct {
	net.Conn
	f    *Filter
	peer peer
}

// Close forgets the connection and closes it.
func (c *conn) Close() error {
	c.f.untrack(c)
	return c.Conn.Close()
}

// CloseWrite half-closes the connection when the underlying one can (as
// *net.TCPConn can; net/http uses it).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// admit tracks nc, a connection in direction dir, and returns it wrapped;
// when the rules disallow it, admit closes it and returns false. A
// connection whose remote end has no IP is returned as it is, untracked.
func (f *Filter) admit(nc net.Conn, dir direction) (net.Conn, bool) {
	ip, ok := addrIP(nc.RemoteAddr())
	if !ok {
		return nc, true
	}
	c := &conn{Conn: nc, f: f, peer: peer{ip: ip, dir: dir}}
	if !f.track(c) {
		_ = nc.Close()
		f.log.Debug("connection cut", slog.String("peer", ip.String()), slog.String("direction", dir.String()))
		return nil, false
	}
	return c, true
}

// Listener returns ln with its accepted connections filtered: one from a
// peer in DropIn is closed at once and never returned; the others are
// tracked. Close and Addr are ln's.
func (f *Filter) Listener(ln net.Listener) net.Listener {
	return &listener{Listener: ln, f: f}
}

type listener struct {
	net.Listener
	f *Filter
}

// Accept returns the next connection the rules allow.
func (l *listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c, ok := l.f.admit(nc, accepted); ok {
			return c, nil
		}
	}
}

// DialContext returns next with its dials filtered: a dial to a peer in
// DropOut fails at once with a *net.OpError (Op "dial") wrapping
// ErrBlocked, and next is not called; the connections next returns are
// tracked. An address given by host name is resolved first when DropOut is
// not empty, and the connection's remote IP is checked again once
// connected.
func (f *Filter) DialContext(next DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return f.dial(ctx, next, network, addr)
	}
}

func (f *Filter) dial(ctx context.Context, next DialFunc, network, addr string) (net.Conn, error) {
	if f.destBlocked(ctx, addr) {
		return nil, blockedDial(network, addr)
	}
	nc, err := next(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c, ok := f.admit(nc, initiated)
	if !ok {
		return nil, blockedDial(network, addr)
	}
	return c, nil
}

// destBlocked reports whether addr (host:port) names only peers in
// DropOut. A host name is resolved; when that fails the dial goes ahead
// (and fails on its own or is checked once connected).
func (f *Filter) destBlocked(ctx context.Context, addr string) bool {
	if f.outEmpty() {
		return false
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return !f.sendAllowed(normalise(ip))
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if f.sendAllowed(normalise(ip)) {
			return false
		}
	}
	return true
}

// blockedDial is the error of a dial the rules refuse.
func blockedDial(network, addr string) error {
	return &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("%s: %w", addr, ErrBlocked)}
}
