package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"
)

func mustPolicy(t *testing.T, allow ...string) *Policy {
	t.Helper()
	var nets []netip.Prefix
	for _, s := range allow {
		n, err := ParseNetwork(s)
		if err != nil {
			t.Fatalf("ParseNetwork(%q): %v", s, err)
		}
		nets = append(nets, n)
	}
	p, err := New(nets)
	if err != nil {
		t.Fatalf("New(%v): %v", allow, err)
	}
	return p
}

// checkAll checks each address of want against p: "" means allowed, else
// the refusal's reason.
func checkAll(t *testing.T, p *Policy, want map[string]string) {
	t.Helper()
	for addr, reason := range want {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			t.Fatalf("bad test address %q: %v", addr, err)
		}
		err = p.Check(a)
		var de *DeniedError
		switch {
		case reason == "" && err != nil:
			t.Errorf("Check(%s) = %v, want allowed", addr, err)
		case reason != "" && !errors.As(err, &de):
			t.Errorf("Check(%s) = %v, want refused as %s", addr, err, reason)
		case reason != "" && (de.Reason != reason || !errors.Is(err, ErrDenied)):
			t.Errorf("Check(%s) = %v (reason %q), want refused as %s, matching ErrDenied", addr, err, de.Reason, reason)
		}
	}
}

const (
	metadata  = "a cloud metadata address"
	linkLocal = "a link-local address"
	unspec    = "an unspecified address"
	outside   = "outside the allowed networks"
)

func TestDefaultPolicy(t *testing.T) {
	want := map[string]string{
		"127.0.0.1":        "",
		"127.0.0.2":        "",
		"::1":              "",
		"10.1.2.3":         "",
		"192.168.1.1":      "",
		"8.8.8.8":          "",
		"2001:db8::1":      "",
		"100.100.100.201":  "",
		"64:ff9b::808:808": "",
		"169.254.169.254":  metadata,
		"169.254.170.2":    metadata,
		"fd00:ec2::254":    metadata,
		"fd20:ce::254":     metadata,
		"100.100.100.200":  metadata,
		"192.0.0.192":      metadata,
		"168.63.129.16":    "a cloud platform address",
		"169.254.0.1":      linkLocal,
		"fe80::1":          linkLocal,
		"fe80::1%eth0":     linkLocal,
		"0.0.0.0":          unspec,
		"0.1.2.3":          unspec,
		"::":               unspec,
		// Other spellings of a denied address.
		"::ffff:169.254.169.254": metadata,
		"64:ff9b::a9fe:a9fe":     metadata,
	}
	checkAll(t, &Policy{}, want)
	checkAll(t, mustPolicy(t), want)
	var nilPolicy *Policy
	checkAll(t, nilPolicy, want)
	if err := (&Policy{}).Check(netip.Addr{}); !errors.Is(err, ErrDenied) {
		t.Errorf("Check(invalid) = %v, want refused", err)
	}
}

func TestAllowList(t *testing.T) {
	checkAll(t, mustPolicy(t, "10.0.0.0/8", "127.0.0.1", "fd00::/8"), map[string]string{
		"10.1.2.3":        "",
		"127.0.0.1":       "",
		"fd12::1":         "",
		"::ffff:10.0.0.1": "",
		"127.0.0.2":       outside,
		"::1":             outside,
		"8.8.8.8":         outside,
		"169.254.169.254": outside,
		"fd00:ec2::254":   metadata, // inside fd00::/8, still denied
	})
}

func TestAllowListOpensTheDenyListOnlyWhenAsNarrow(t *testing.T) {
	checkAll(t, mustPolicy(t, "0.0.0.0/0", "::/0"), map[string]string{
		"8.8.8.8":         "",
		"169.254.169.254": metadata,
		"169.254.1.1":     linkLocal,
		"fe80::1":         linkLocal,
		"0.0.0.0":         unspec,
	})
	checkAll(t, mustPolicy(t, "169.254.0.0/16"), map[string]string{
		"169.254.1.1":     "",
		"169.254.169.254": metadata,
		"10.0.0.1":        outside,
	})
	checkAll(t, mustPolicy(t, "169.254.169.254/32"), map[string]string{
		"169.254.169.254":        "",
		"::ffff:169.254.169.254": "",
		"169.254.1.1":            outside,
	})
	// An IPv4-mapped allowed network stands for its IPv4 one.
	checkAll(t, mustPolicy(t, "::ffff:169.254.169.254/128", "64:ff9b::/96"), map[string]string{
		"169.254.169.254":    "",
		"64:ff9b::a9fe:a9fe": "",
		"64:ff9b::a9fe:101":  linkLocal,
	})
}

func TestNewRefusesInvalidNetworks(t *testing.T) {
	if _, err := New([]netip.Prefix{{}}); err == nil {
		t.Error("New accepted an invalid prefix")
	}
	p, err := New([]netip.Prefix{netip.MustParsePrefix("10.1.2.3/8")})
	if err != nil {
		t.Fatal(err)
	}
	// The network is masked: 10.1.2.3/8 allows 10.0.0.0/8, and only it.
	for addr, allowed := range map[string]bool{"10.1.2.3": true, "10.200.0.1": true, "11.0.0.1": false} {
		if err := p.Check(netip.MustParseAddr(addr)); (err == nil) != allowed {
			t.Errorf("Check(%s) = %v, want allowed %v", addr, err, allowed)
		}
	}
	if err := (&Policy{}).Check(netip.MustParseAddr("11.0.0.1")); err != nil {
		t.Errorf("the default policy refuses 11.0.0.1: %v", err)
	}
}

func TestControl(t *testing.T) {
	p := &Policy{}
	for _, addr := range []string{"169.254.169.254:80", "[fe80::1%lo]:443", "[fd00:ec2::254]:80", "0.0.0.0:8080", "not-an-address:80", "10.0.0.1"} {
		if err := p.Control("tcp", addr, nil); !errors.Is(err, ErrDenied) {
			t.Errorf("Control(%q) = %v, want refused", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:80", "[::1]:443", "10.0.0.1:80"} {
		if err := p.Control("tcp", addr, nil); err != nil {
			t.Errorf("Control(%q) = %v, want allowed", addr, err)
		}
	}
}

// guardedDialer is p's dialer with one more check after the policy's: an
// address the policy let through that is not loopback fails the test and
// is not connected to, so that no test sends a packet off the machine.
func guardedDialer(t *testing.T, p *Policy) *net.Dialer {
	d := p.Dialer()
	check := d.Control
	d.Control = func(network, address string, c syscall.RawConn) error {
		if err := check(network, address, c); err != nil {
			return err
		}
		if ap, err := netip.ParseAddrPort(address); err != nil || !ap.Addr().IsLoopback() {
			t.Errorf("the policy let %s %s through", network, address)
			return errors.New("test: not connecting off loopback")
		}
		return nil
	}
	return d
}

func TestDialerRefusesBeforeConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	d := guardedDialer(t, &Policy{})
	for _, addr := range []string{"169.254.169.254:80", "[fd00:ec2::254]:80", "100.100.100.200:80", "[::ffff:a9fe:a9fe]:80"} {
		if c, err := d.DialContext(ctx, "tcp", addr); !errors.Is(err, ErrDenied) {
			if c != nil {
				c.Close()
			}
			t.Errorf("Dial(%s) = %v, want refused by the policy", addr, err)
		}
	}
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("Dial of loopback: %v", err)
	}
	c.Close()

	// A name is checked on the address it resolves to.
	d = guardedDialer(t, mustPolicy(t, "10.0.0.0/8"))
	if _, err := d.DialContext(ctx, "tcp", net.JoinHostPort("localhost", port)); !errors.Is(err, ErrDenied) {
		t.Errorf("Dial(localhost) outside the allow-list = %v, want refused", err)
	}
}

func TestTransportUsesNoProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	tr := (&Policy{}).Transport()
	if tr.Proxy != nil {
		t.Error("the transport uses a proxy: the policy would check the proxy's address, not the upstream's")
	}
	if tr.DialContext == nil || tr.TLSHandshakeTimeout == 0 {
		t.Errorf("transport = %+v, want the policy's dialer and http.DefaultTransport's timeouts", tr)
	}
}

func TestParseNetwork(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.0/8":   "10.0.0.0/8",
		" 10.0.0.0/8 ": "10.0.0.0/8",
		"127.0.0.1":    "127.0.0.1/32",
		"::1":          "::1/128",
		"fd00::/8":     "fd00::/8",
		"0.0.0.0/0":    "0.0.0.0/0",
	} {
		got, err := ParseNetwork(in)
		if err != nil || got.String() != want {
			t.Errorf("ParseNetwork(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for in, wantErr := range map[string]string{
		"10.0.0/8":     "not a network",
		"10.1.2.3/8":   "did you mean 10.0.0.0/8?",
		"10.0.0.0/33":  "not a network",
		"example.com":  "not a network",
		"":             "not a network",
		"fe80::1%eth0": "not a network",
	} {
		if _, err := ParseNetwork(in); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseNetwork(%q) = %v, want an error with %q", in, err, wantErr)
		}
	}
}
