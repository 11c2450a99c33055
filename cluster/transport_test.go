package cluster

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestRaftAdvertise(t *testing.T) {
	bound := &net.TCPAddr{IP: net.ParseIP("172.20.0.4"), Port: 8300}
	for _, tc := range []struct {
		flag  string
		bound *net.TCPAddr
		want  string
		err   bool
	}{
		{"n1:8300", bound, "n1:8300", false},                                                     // a name is advertised as given
		{"n1:0", &net.TCPAddr{IP: bound.IP, Port: 41000}, "n1:41000", false},                     // with the bound port
		{"172.20.0.4:8300", bound, "172.20.0.4:8300", false},                                     // an IP as bound
		{"127.0.0.1:0", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5}, "127.0.0.1:5", false}, // port 0 on an IP
		{"0.0.0.0:8300", &net.TCPAddr{IP: net.IPv4zero, Port: 8300}, "", true},                   // unspecified: not advertisable
		{":8300", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8300}, "", true},
	} {
		got, err := raftAdvertise(tc.flag, tc.bound)
		if tc.err {
			if err == nil {
				t.Errorf("%s: advertised %v, want an error", tc.flag, got)
			}
			continue
		}
		if err != nil || got.String() != tc.want || got.Network() != "tcp" {
			t.Errorf("%s bound %s: got %v, %v; want %s", tc.flag, tc.bound, got, err, tc.want)
		}
	}
}

// TestRaftDialToSelfIsRefused: a configuration entry that names this
// node's own address under another id must not connect the node to itself.
func TestRaftDialToSelfIsRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	g := &selfGuard{StreamLayer: &tcpStream{Listener: ln, advertise: ln.Addr()}, bound: ln.Addr().String()}
	if c, err := g.Dial(raft.ServerAddress(ln.Addr().String()), time.Second); !errors.Is(err, errSelfDial) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial to own address: %v, want errSelfDial", err)
	}
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	c, err := g.Dial(raft.ServerAddress(other.Addr().String()), time.Second)
	if err != nil {
		t.Fatalf("dial to a peer: %v", err)
	}
	c.Close()
}
