package faultnet

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
)

// countingDial dials from ip and counts its calls.
func countingDial(ip string, calls *atomic.Int32) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		calls.Add(1)
		return dialerFrom(ip).DialContext(ctx, network, addr)
	}
}

func wantBlocked(t *testing.T, err error) {
	t.Helper()
	var op *net.OpError
	if !errors.Is(err, ErrBlocked) || !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("dial error = %v, want a dial *net.OpError wrapping ErrBlocked", err)
	}
}

func TestDialToDropOutFailsAtOnce(t *testing.T) {
	lnB := listen(t, ipB)
	echo(t, lnB)
	lnC := listen(t, ipC)
	echo(t, lnC)
	f := New()
	if err := f.Set(Rules{DropOut: []string{ipB}}); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	dial := f.DialContext(countingDial(ipA, &calls))

	_, err := dial(context.Background(), "tcp", lnB.Addr().String())
	wantBlocked(t, err)
	if n := calls.Load(); n != 0 {
		t.Fatalf("the blocked dial reached the network (%d dials)", n)
	}

	c, err := dial(context.Background(), "tcp", lnC.Addr().String())
	if err != nil {
		t.Fatalf("dial to a peer not in DropOut: %v", err)
	}
	wantEcho(t, c, "allowed dial")
	if n := f.live(); n != 1 {
		t.Fatalf("live = %d, want 1", n)
	}
	c.Close()
	if n := f.live(); n != 0 {
		t.Fatalf("live after Close = %d, want 0", n)
	}

	// Clearing the rules lets B in again.
	if err := f.Set(Rules{}); err != nil {
		t.Fatal(err)
	}
	c, err = dial(context.Background(), "tcp", lnB.Addr().String())
	if err != nil {
		t.Fatalf("dial after clearing the rules: %v", err)
	}
	wantEcho(t, c, "dial after clearing")
	c.Close()
}

func TestDialByHostNameIsResolved(t *testing.T) {
	ln := listen(t, "127.0.0.1")
	f := New()
	if err := f.Set(Rules{DropOut: []string{"localhost"}}); err != nil {
		t.Skipf("localhost does not resolve here: %v", err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	var calls atomic.Int32
	_, err := f.DialContext(countingDial("127.0.0.1", &calls))(context.Background(), "tcp", net.JoinHostPort("localhost", port))
	wantBlocked(t, err)
	if n := calls.Load(); n != 0 {
		t.Fatalf("the blocked dial reached the network (%d dials)", n)
	}
}

// A dial whose address looked allowed but which reached a peer in DropOut
// (a name that resolved elsewhere) is cut once connected.
func TestDialCheckedOnceConnected(t *testing.T) {
	lnB := listen(t, ipB)
	f := New()
	if err := f.Set(Rules{DropOut: []string{ipB}}); err != nil {
		t.Fatal(err)
	}
	toB := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dialerFrom(ipA).DialContext(ctx, network, lnB.Addr().String())
	}
	_, err := f.DialContext(toB)(context.Background(), "tcp", net.JoinHostPort(ipD, "1"))
	wantBlocked(t, err)
	srv, err := lnB.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	wantClosed(t, srv, "B's end of the cut connection")
	if n := f.live(); n != 0 {
		t.Fatalf("live = %d, want 0", n)
	}
}

func TestAcceptFromDropInIsClosed(t *testing.T) {
	f := New()
	if err := f.Set(Rules{DropIn: []string{ipB}}); err != nil {
		t.Fatal(err)
	}
	ln := f.Listener(listen(t, ipA))
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()

	fromB := dialFrom(t, ipB, ln.Addr().String())
	wantClosed(t, fromB, "connection from B")
	// B's connection was accepted and closed before C dials: the first
	// connection Accept returns must be C's.
	fromC := dialFrom(t, ipC, ln.Addr().String())
	c, ok := <-accepted
	if !ok {
		t.Fatal("Accept failed")
	}
	defer c.Close()
	if got := remoteIP(c); got != ipC {
		t.Fatalf("Accept returned a connection from %s, want %s", got, ipC)
	}
	if _, err := fromC.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil {
		t.Fatalf("reading C's connection: %v", err)
	}
	if n := f.live(); n != 1 {
		t.Fatalf("live = %d, want 1", n)
	}
}

// TestSetClosesLiveConns runs as node A: it has dialed B (initiated) and
// accepted C (accepted); Set cuts each only in its own direction.
func TestSetClosesLiveConns(t *testing.T) {
	f := New()
	lnB := listen(t, ipB)
	echo(t, lnB)
	lnA := f.Listener(listen(t, ipA))
	echo(t, lnA)

	var calls atomic.Int32
	toB, err := f.DialContext(countingDial(ipA, &calls))(context.Background(), "tcp", lnB.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer toB.Close()
	fromC := dialFrom(t, ipC, lnA.Addr().String())
	wantEcho(t, toB, "A→B")
	wantEcho(t, fromC, "C→A")
	if n := f.live(); n != 2 {
		t.Fatalf("live = %d, want 2", n)
	}

	// The other directions: neither connection is affected.
	if err := f.Set(Rules{DropIn: []string{ipB}, DropOut: []string{ipC}}); err != nil {
		t.Fatal(err)
	}
	wantEcho(t, toB, "A→B with DropIn B")
	wantEcho(t, fromC, "C→A with DropOut C")

	if err := f.Set(Rules{DropOut: []string{ipB}}); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, toB, "A→B with DropOut B")
	wantEcho(t, fromC, "C→A with DropOut B")

	if err := f.Set(Rules{DropIn: []string{ipC}}); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, fromC, "C→A with DropIn C")
	if n := f.live(); n != 0 {
		t.Fatalf("live = %d, want 0", n)
	}
}

// Set and dials race: after Set returns, no connection to a peer it drops
// is left open, whichever side of Set its dial fell on.
func TestSetRacesDials(t *testing.T) {
	lnB := listen(t, ipB)
	echo(t, lnB)
	f := New()
	var calls atomic.Int32
	dial := f.DialContext(countingDial(ipA, &calls))

	conns := make(chan net.Conn, 1024)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := dial(context.Background(), "tcp", lnB.Addr().String())
			if err == nil {
				select {
				case conns <- c:
				default:
					c.Close()
				}
			}
		}
	}()
	for i := range 50 {
		rules := Rules{}
		if i%2 == 0 {
			rules.DropIn = []string{ipB}
		}
		if err := f.Set(rules); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Set(Rules{DropOut: []string{ipB}}); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	close(conns)
	for c := range conns {
		wantClosed(t, c, "a connection to B after Set(DropOut B)")
	}
	if n := f.live(); n != 0 {
		t.Fatalf("live = %d, want 0", n)
	}
}
