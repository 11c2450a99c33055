package faultnet

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// tcpStream is a plain Raft stream layer over ln, advertising advertise
// (ln's address when nil), as a node's own.
type tcpStream struct {
	net.Listener
	advertise net.Addr
}

func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

func (s *tcpStream) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.Listener.Addr()
}

func TestStreamLayerAddr(t *testing.T) {
	ln := listen(t, ipA)
	f := New()
	if got := f.StreamLayer(&tcpStream{Listener: ln}).Addr(); got.String() != ln.Addr().String() {
		t.Fatalf("Addr without advertise = %v, want %v", got, ln.Addr())
	}
	adv := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 8300}
	if got := f.StreamLayer(&tcpStream{Listener: ln, advertise: adv}).Addr(); got != adv {
		t.Fatalf("Addr = %v, want %v", got, adv)
	}
}

// raftTransport is a Raft network transport over f's stream layer on ip;
// it answers every AppendEntries with success until the test ends.
func raftTransport(t *testing.T, f *Filter, ip string) *raft.NetworkTransport {
	t.Helper()
	tr := raft.NewNetworkTransportWithLogger(f.StreamLayer(&tcpStream{Listener: listen(t, ip)}), 2, wait, hclog.NewNullLogger())
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		tr.Close()
	})
	go func() {
		for {
			select {
			case rpc := <-tr.Consumer():
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			case <-done:
				return
			}
		}
	}()
	return tr
}

func appendEntries(a, b *raft.NetworkTransport) error {
	var resp raft.AppendEntriesResponse
	return a.AppendEntries("b", b.LocalAddr(), &raft.AppendEntriesRequest{Term: 1}, &resp)
}

// A Raft transport over the stream layer: a pooled connection is cut by
// Set, and dials are refused while the rule holds.
func TestStreamLayerCutsRaft(t *testing.T) {
	fa := New()
	a := raftTransport(t, fa, ipA)
	b := raftTransport(t, New(), ipB)

	if err := appendEntries(a, b); err != nil {
		t.Fatalf("AppendEntries A→B: %v", err)
	}
	if n := fa.live(); n != 1 {
		t.Fatalf("A's live connections = %d, want 1 (pooled)", n)
	}
	if err := fa.Set(Rules{DropOut: []string{ipB}}); err != nil {
		t.Fatal(err)
	}
	if n := fa.live(); n != 0 {
		t.Fatalf("A's live connections after Set = %d, want 0", n)
	}
	// The first call may take the pooled (now closed) connection; the
	// next must dial, and be refused.
	if err := appendEntries(a, b); err == nil {
		t.Fatal("AppendEntries A→B succeeded with DropOut B")
	}
	err := appendEntries(a, b)
	wantBlocked(t, err)

	if err := fa.Set(Rules{}); err != nil {
		t.Fatal(err)
	}
	if err := appendEntries(a, b); err != nil {
		t.Fatalf("AppendEntries A→B after clearing the rules: %v", err)
	}
}

func TestStreamLayerAcceptFiltered(t *testing.T) {
	f := New()
	if err := f.Set(Rules{DropIn: []string{ipC}}); err != nil {
		t.Fatal(err)
	}
	sl := f.StreamLayer(&tcpStream{Listener: listen(t, ipA)})
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := sl.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	wantClosed(t, dialFrom(t, ipC, sl.Addr().String()), "connection from C")
	dialFrom(t, ipB, sl.Addr().String())
	select {
	case c, ok := <-accepted:
		if !ok {
			t.Fatal("Accept failed")
		}
		defer c.Close()
		if got := remoteIP(c); got != ipB {
			t.Fatalf("Accept returned a connection from %s, want %s", got, ipB)
		}
	case <-time.After(wait):
		t.Fatal("Accept returned nothing")
	}
}
