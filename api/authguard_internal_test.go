package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"testing"
)

func TestSourceOf(t *testing.T) {
	for remote, want := range map[string]string{
		"127.0.0.1:4000":           "127.0.0.1/32",
		"10.1.2.3:1":               "10.1.2.3/32",
		"[::ffff:10.1.2.3]:1":      "10.1.2.3/32",
		"[2001:db8:1:2::1]:443":    "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::9]:1": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:1":         "fe80::/64",
		"[::1]:8080":               "::/64",
		"not an address":           "invalid Prefix",
		"":                         "invalid Prefix",
	} {
		if got := (clientAddrs{}).source(&http.Request{RemoteAddr: remote}).String(); got != want {
			t.Errorf("sourceOf(%q) = %s, want %s", remote, got, want)
		}
	}
}

// TestAuthGuardOverflow checks that addresses past the table's bound share
// one bucket: many addresses neither grow the table nor escape the limit.
func TestAuthGuardOverflow(t *testing.T) {
	g := newAuthGuard(AuthFailures{PerMinute: 2}, slog.New(slog.NewTextHandler(io.Discard, nil)), noMetrics{})
	defer g.close()
	g.maxSources = 3
	addr := func(i int) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 32) }
	for i := range 3 {
		g.fail(addr(i), reasonUnknown, "/")
	}
	// Addresses 3, 4 and 5 are new: they share the overflow bucket of 2.
	g.fail(addr(3), reasonUnknown, "/")
	g.fail(addr(4), reasonUnknown, "/")
	if err := g.check(addr(5), "/", http.Header{}); err == nil {
		t.Fatal("a new address past the bound escaped the shared limit")
	}
	if err := g.check(addr(0), "/", http.Header{}); err != nil {
		t.Fatalf("a known address with a failure left was refused: %v", err)
	}
	g.mu.Lock()
	n := len(g.sources)
	g.mu.Unlock()
	if n != 4 {
		t.Errorf("the table holds %d entries, want 3 and the overflow", n)
	}
}
