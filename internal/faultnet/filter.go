package faultnet

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
)

// ErrBlocked is what a dial the rules refuse fails with (wrapped in a
// *net.OpError whose Op is "dial").
var ErrBlocked = errors.New("faultnet: blocked by the test fault layer")

// direction says which end initiated a connection.
type direction uint8

const (
	initiated direction = iota + 1 // this node dialed the peer
	accepted                       // the peer dialed this node
)

func (d direction) String() string {
	if d == initiated {
		return "initiated"
	}
	return "accepted"
}

// peer keys the live connections: the remote IP and who dialed.
type peer struct {
	ip  netip.Addr
	dir direction
}

// Filter is one node's fault rules and the live connections its wrappers
// handed out. The zero value is not usable: call New. A Filter is safe for
// concurrent use.
type Filter struct {
	log *slog.Logger

	mu    sync.Mutex
	in    addrSet // DropIn
	out   addrSet // DropOut
	conns map[peer]map[*conn]struct{}
}

// New returns a Filter with no rules, logging to slog.Default().
func New() *Filter { return NewWithLogger(nil) }

// NewWithLogger returns a Filter with no rules, logging to l (slog.Default
// when nil).
func NewWithLogger(l *slog.Logger) *Filter {
	if l == nil {
		l = slog.Default()
	}
	return &Filter{
		log: l.With(slog.String("component", "faultnet")),
		in:  addrSet{}, out: addrSet{},
		conns: make(map[peer]map[*conn]struct{}),
	}
}

// Set replaces the rules (see SetContext).
func (f *Filter) Set(r Rules) error { return f.SetContext(context.Background(), r) }

// SetContext replaces the rules, resolving host names within ctx. Before it
// returns, every tracked live connection the new rules disallow is closed,
// and every connection or packet checked after it returns is checked
// against the new rules. On error (an entry that is neither an IP nor a
// name that resolves) the rules are left as they were.
func (f *Filter) SetContext(ctx context.Context, r Rules) error {
	in, err := resolveAll(ctx, "drop_in", r.DropIn)
	if err != nil {
		return err
	}
	out, err := resolveAll(ctx, "drop_out", r.DropOut)
	if err != nil {
		return err
	}
	var doomed []*conn
	f.mu.Lock()
	f.in, f.out = in, out
	for p, set := range f.conns {
		if f.allowedLocked(p) {
			continue
		}
		for c := range set {
			doomed = append(doomed, c)
		}
		delete(f.conns, p)
	}
	f.mu.Unlock()
	for _, c := range doomed {
		_ = c.Conn.Close()
	}
	f.log.Info("fault rules set", slog.Any("drop_in", in.strings()), slog.Any("drop_out", out.strings()),
		slog.Int("closed_conns", len(doomed)))
	return nil
}

// Rules returns the rules in force: resolved IPs, sorted, never nil.
func (f *Filter) Rules() Rules {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Rules{DropIn: f.in.strings(), DropOut: f.out.strings()}
}

// allowedLocked reports whether a connection with p may live; f.mu held.
func (f *Filter) allowedLocked(p peer) bool {
	if p.dir == initiated {
		return !f.out.has(p.ip)
	}
	return !f.in.has(p.ip)
}

// sendAllowed reports whether this node may send a packet to ip.
func (f *Filter) sendAllowed(ip netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.out.has(ip)
}

// receiveAllowed reports whether this node may take a packet from ip.
func (f *Filter) receiveAllowed(ip netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.in.has(ip)
}

// outEmpty reports whether no peer is in DropOut (so that a dial by host
// name needs no lookup).
func (f *Filter) outEmpty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.out) == 0
}

// track registers c unless the rules disallow it, atomically with respect
// to Set: a connection tracked here is either checked against the new
// rules or closed by Set.
func (f *Filter) track(c *conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.allowedLocked(c.peer) {
		return false
	}
	set := f.conns[c.peer]
	if set == nil {
		set = make(map[*conn]struct{})
		f.conns[c.peer] = set
	}
	set[c] = struct{}{}
	return true
}

// untrack forgets c (a no-op when it is not tracked).
func (f *Filter) untrack(c *conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.conns[c.peer]
	delete(set, c)
	if len(set) == 0 {
		delete(f.conns, c.peer)
	}
}
