package faultnet

import (
	"io"
	"log"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// netTransport is memberlist's NetTransport on ip, port 0.
func netTransport(t *testing.T, ip string) *memberlist.NetTransport {
	t.Helper()
	needLoopbackRange(t)
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{ip}, Logger: log.New(io.Discard, "", 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	return nt
}

// gossipOn is a filtered NetTransport on ip, shut down when the test ends.
func gossipOn(t *testing.T, f *Filter, ip string) (memberlist.NodeAwareTransport, string) {
	t.Helper()
	nt := netTransport(t, ip)
	g := f.Memberlist(nt)
	t.Cleanup(func() {
		if err := g.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return g, net.JoinHostPort(ip, strconv.Itoa(nt.GetAutoBindPort()))
}

// nextPacket returns the next packet g delivers.
func nextPacket(t *testing.T, g memberlist.Transport) *memberlist.Packet {
	t.Helper()
	select {
	case p := <-g.PacketCh():
		return p
	case <-time.After(wait):
		t.Fatal("no packet delivered")
		return nil
	}
}

// packetsUntil reads g's packets until one carries want, and fails if one
// carrying bad comes first.
func packetsUntil(t *testing.T, g memberlist.Transport, want, bad string) *memberlist.Packet {
	t.Helper()
	for {
		p := nextPacket(t, g)
		switch string(p.Buf) {
		case want:
			return p
		case bad:
			t.Fatalf("packet %q was delivered", bad)
		}
	}
}

func send(t *testing.T, g memberlist.Transport, msg, addr string) {
	t.Helper()
	if _, err := g.WriteTo([]byte(msg), addr); err != nil {
		t.Fatalf("WriteTo %s: %v", addr, err)
	}
}

func TestMemberlistPacketsFromDropInDropped(t *testing.T) {
	fb := New()
	a, _ := gossipOn(t, New(), ipA)
	b, addrB := gossipOn(t, fb, ipB)
	c, _ := gossipOn(t, New(), ipC)

	if err := fb.Set(Rules{DropIn: []string{ipA}}); err != nil {
		t.Fatal(err)
	}
	send(t, a, "from A, dropped", addrB)
	send(t, c, "from C", addrB)
	p := packetsUntil(t, b, "from C", "from A, dropped")
	if got := remoteIPOf(p.From); got != ipC {
		t.Fatalf("packet from %s, want %s", got, ipC)
	}

	if err := fb.Set(Rules{}); err != nil {
		t.Fatal(err)
	}
	send(t, a, "from A", addrB)
	packetsUntil(t, b, "from A", "")
}

func TestMemberlistPacketsToDropOutDropped(t *testing.T) {
	fa := New()
	a, _ := gossipOn(t, fa, ipA)
	b, addrB := gossipOn(t, New(), ipB)

	if err := fa.Set(Rules{DropOut: []string{ipB}}); err != nil {
		t.Fatal(err)
	}
	send(t, a, "to B, dropped", addrB) // reported sent
	if err := fa.Set(Rules{}); err != nil {
		t.Fatal(err)
	}
	send(t, a, "to B", addrB)
	packetsUntil(t, b, "to B", "to B, dropped")
}

func TestMemberlistDialToDropOutFails(t *testing.T) {
	fa := New()
	a, _ := gossipOn(t, fa, ipA)
	b, addrB := gossipOn(t, New(), ipB)
	if err := fa.Set(Rules{DropOut: []string{ipB}}); err != nil {
		t.Fatal(err)
	}
	_, err := a.DialTimeout(addrB, wait)
	wantBlocked(t, err)
	_, err = a.DialAddressTimeout(memberlist.Address{Addr: addrB, Name: "b"}, wait)
	wantBlocked(t, err)

	if err := fa.Set(Rules{}); err != nil {
		t.Fatal(err)
	}
	c, err := a.DialTimeout(addrB, wait)
	if err != nil {
		t.Fatalf("dial after clearing the rules: %v", err)
	}
	defer c.Close()
	select {
	case in := <-b.StreamCh():
		in.Close()
	case <-time.After(wait):
		t.Fatal("B got no stream")
	}
	if err := fa.Set(Rules{DropOut: []string{ipB}}); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, c, "A→B stream with DropOut B")
}

func TestMemberlistStreamsFromDropInClosed(t *testing.T) {
	fb := New()
	b, addrB := gossipOn(t, fb, ipB)
	if err := fb.Set(Rules{DropIn: []string{ipA}}); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, dialFrom(t, ipA, addrB), "stream from A")
	fromC := dialFrom(t, ipC, addrB)
	var in net.Conn
	select {
	case in = <-b.StreamCh():
	case <-time.After(wait):
		t.Fatal("B got no stream")
	}
	defer in.Close()
	if got := remoteIP(in); got != ipC {
		t.Fatalf("stream from %s, want %s", got, ipC)
	}
	if err := fb.Set(Rules{DropIn: []string{ipC}}); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, fromC, "stream from C after DropIn C")
}

// Shutdown returns while the inner transport has packets and streams that
// nobody reads.
func TestMemberlistShutdownUnread(t *testing.T) {
	a, _ := gossipOn(t, New(), ipA)
	nt := netTransport(t, ipB) // not gossipOn: its cleanup would hang too
	g := New().Memberlist(nt)
	addrB := net.JoinHostPort(ipB, strconv.Itoa(nt.GetAutoBindPort()))
	send(t, a, "one", addrB)
	send(t, a, "two", addrB)
	dialFrom(t, ipC, addrB)
	dialFrom(t, ipC, addrB)
	done := make(chan error, 1)
	go func() { done <- g.Shutdown() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("Shutdown hangs")
	}
}

func remoteIPOf(a net.Addr) string {
	ip, _ := addrIP(a)
	return ip.String()
}
