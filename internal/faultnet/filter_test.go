package faultnet

import (
	"net"
	"slices"
	"testing"
)

func TestRulesNormalised(t *testing.T) {
	f := New()
	if got := f.Rules(); got.DropIn == nil || got.DropOut == nil || len(got.DropIn)+len(got.DropOut) != 0 {
		t.Fatalf("initial Rules = %#v, want empty, non-nil lists", got)
	}
	err := f.Set(Rules{
		DropIn:  []string{"10.0.0.2", "::ffff:10.0.0.1", " 10.0.0.1 ", "fe80::1%eth0"},
		DropOut: []string{"2001:db8::1", "2001:DB8:0::1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := f.Rules()
	if want := []string{"10.0.0.1", "10.0.0.2", "fe80::1"}; !slices.Equal(got.DropIn, want) {
		t.Fatalf("DropIn = %q, want %q", got.DropIn, want)
	}
	if want := []string{"2001:db8::1"}; !slices.Equal(got.DropOut, want) {
		t.Fatalf("DropOut = %q, want %q", got.DropOut, want)
	}
}

func TestRulesHostNameResolved(t *testing.T) {
	f := New()
	if err := f.Set(Rules{DropOut: []string{"localhost"}}); err != nil {
		t.Skipf("localhost does not resolve here: %v", err)
	}
	if got := f.Rules().DropOut; !slices.Contains(got, "127.0.0.1") && !slices.Contains(got, "::1") {
		t.Fatalf("DropOut = %q, want localhost's addresses", got)
	}
}

func TestSetRefusesBadEntriesAndKeepsRules(t *testing.T) {
	f := New()
	good := Rules{DropIn: []string{"10.0.0.1"}, DropOut: []string{"10.0.0.2"}}
	if err := f.Set(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Rules{
		{DropIn: []string{""}},
		{DropOut: []string{"10.0.0.1:80"}},
		{DropOut: []string{"10.0.0.0/8"}},
		{DropIn: []string{"no-such-host.invalid"}},
		{DropIn: []string{"10.0.0.3"}, DropOut: []string{"[::1]:80"}},
	} {
		if err := f.Set(bad); err == nil {
			t.Errorf("Set(%+v) = nil, want an error", bad)
		}
		if got := f.Rules(); !slices.Equal(got.DropIn, good.DropIn) || !slices.Equal(got.DropOut, good.DropOut) {
			t.Fatalf("after Set(%+v) failed, Rules = %+v, want %+v", bad, got, good)
		}
	}
}

func TestAddrIP(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want string
		ok   bool
	}{
		{&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 1}, "10.0.0.1", true},
		{&net.UDPAddr{IP: net.ParseIP("::ffff:10.0.0.1"), Port: 1}, "10.0.0.1", true},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0"}, "fe80::1", true},
		{&net.UnixAddr{Name: "/tmp/x", Net: "unix"}, "", false},
		{(*net.TCPAddr)(nil), "", false},
		{nil, "", false},
	} {
		ip, ok := addrIP(c.addr)
		if ok != c.ok || (ok && ip.String() != c.want) {
			t.Errorf("addrIP(%v) = %v, %v; want %s, %v", c.addr, ip, ok, c.want, c.ok)
		}
	}
}
