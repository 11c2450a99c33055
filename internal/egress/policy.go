package egress

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrDenied is matched (errors.Is) by every refusal of a Policy.
var ErrDenied = errors.New("egress: address not allowed")

// DeniedError is a Policy's refusal of one address. Its text names the
// address, so it belongs in the node's log, not in a record.
type DeniedError struct {
	// Addr is the refused address (invalid when the dialled address was
	// not an IP address).
	Addr netip.Addr
	// Reason says what the address is, e.g. "a cloud metadata address" or
	// "outside the allowed networks".
	Reason string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("egress: %s is %s: not allowed", e.Addr, e.Reason)
}

// Is makes errors.Is(err, ErrDenied) hold.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// deniedNetwork is one entry of the built-in deny list.
type deniedNetwork struct {
	prefix netip.Prefix
	what   string
}

// denied is the built-in deny list. The metadata entries sit inside the
// link-local ones too where they are link-local: being more specific,
// they need an allowed network at least as narrow to be reached.
var denied = []deniedNetwork{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified address"}, // "this network"; 0.0.0.0 reaches the host itself
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("169.254.169.254/32"), "a cloud metadata address"}, // AWS, GCP, Azure, OCI, OpenStack, DigitalOcean…
	{netip.MustParsePrefix("169.254.170.2/32"), "a cloud metadata address"},   // AWS ECS task credentials
	{netip.MustParsePrefix("fd00:ec2::254/128"), "a cloud metadata address"},  // AWS IMDS over IPv6
	{netip.MustParsePrefix("fd20:ce::254/128"), "a cloud metadata address"},   // GCP metadata over IPv6
	{netip.MustParsePrefix("100.100.100.200/32"), "a cloud metadata address"}, // Alibaba Cloud
	{netip.MustParsePrefix("192.0.0.192/32"), "a cloud metadata address"},     // Oracle Cloud
	{netip.MustParsePrefix("168.63.129.16/32"), "a cloud platform address"},   // Azure WireServer
}

// nat64 is the well-known NAT64 prefix (RFC 6052): 64:ff9b::a9fe:a9fe
// reaches 169.254.169.254 through a NAT64 gateway, so the IPv4 address it
// embeds is checked against the deny list too.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Policy decides which addresses may be connected to. The zero Policy
// allows every address outside the built-in deny list. A Policy is not
// changed after New and is safe for concurrent use.
type Policy struct {
	allow []netip.Prefix
}

// New returns the policy that reaches only the networks in allow, or
// every address when allow is empty; the built-in deny list applies on
// top either way, except to an address that an allowed network contains
// with a prefix at least as long as every deny-list entry containing it
// (169.254.169.254/32 opens the metadata address; 0.0.0.0/0 or
// 169.254.0.0/16 do not). Networks are taken masked, IPv4-mapped IPv6
// ones as IPv4; an invalid prefix is an error.
func New(allow []netip.Prefix) (*Policy, error) {
	p := &Policy{}
	for _, n := range allow {
		if !n.IsValid() {
			return nil, fmt.Errorf("egress: invalid network %q", n)
		}
		if a := n.Addr(); a.Is4In6() && n.Bits() >= 96 {
			n = netip.PrefixFrom(a.Unmap(), n.Bits()-96)
		}
		p.allow = append(p.allow, n.Masked())
	}
	return p, nil
}

// Check returns nil when addr may be reached, or a *DeniedError. A zone
// is ignored, and an IPv4-mapped IPv6 address is checked as IPv4.
func (p *Policy) Check(addr netip.Addr) error {
	addr = addr.WithZone("").Unmap()
	if !addr.IsValid() {
		return &DeniedError{Addr: addr, Reason: "not an IP address"}
	}
	if p != nil && len(p.allow) > 0 && !p.allows(addr, 0) {
		return &DeniedError{Addr: addr, Reason: "outside the allowed networks"}
	}
	if err := p.checkDenied(addr, addr); err != nil {
		return err
	}
	if nat64.Contains(addr) {
		b := addr.As16()
		return p.checkDenied(addr, netip.AddrFrom4([4]byte(b[12:])))
	}
	return nil
}

// checkDenied refuses addr when what (addr, or the address it embeds)
// is on the deny list and not explicitly allowed.
func (p *Policy) checkDenied(addr, what netip.Addr) error {
	bits, reason := -1, ""
	for _, d := range denied {
		if d.prefix.Contains(what) && d.prefix.Bits() > bits {
			bits, reason = d.prefix.Bits(), d.what
		}
	}
	if bits < 0 || p.allows(what, bits) {
		return nil
	}
	return &DeniedError{Addr: addr, Reason: reason}
}

// allows reports whether an allowed network of at least minBits bits
// contains addr.
func (p *Policy) allows(addr netip.Addr, minBits int) bool {
	if p == nil {
		return false
	}
	for _, n := range p.allow {
		if n.Bits() >= minBits && n.Contains(addr) {
			return true
		}
	}
	return false
}

// Control is a net.Dialer Control function: it refuses, before the
// connection is attempted, an address (ip:port, as the dialer resolved
// it) that the policy does not allow. Anything that is not an IP address
// is refused.
func (p *Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &DeniedError{Reason: fmt.Sprintf("%q, not an IP address", address)}
	}
	return p.Check(ap.Addr())
}

// Dialer returns a new dialer that checks every address it connects to
// with Control, with the timeouts of http.DefaultTransport's dialer.
func (p *Policy) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control}
}

// Transport returns a new http.Transport that dials through Dialer, with
// the settings of http.DefaultTransport except one: it uses no proxy, not
// even one named by HTTP_PROXY or HTTPS_PROXY, since the policy can only
// check the addresses it connects to itself. Its connections count the
// bytes written to them (TrackSend).
func (p *Policy) Transport() *http.Transport {
	return &http.Transport{
		DialContext:           CountWrites(p.Dialer().DialContext),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}
}

// ParseNetwork parses a network written as a CIDR ("10.0.0.0/8",
// "fd00::/8") or as a single address ("127.0.0.1", "::1"). A CIDR with
// bits set past its prefix length ("10.1.2.3/8") is an error, since it
// most likely means another network than the one it would allow.
func ParseNetwork(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	var (
		n   netip.Prefix
		err error
	)
	if strings.Contains(s, "/") {
		n, err = netip.ParsePrefix(s)
	} else {
		var a netip.Addr
		if a, err = netip.ParseAddr(s); err == nil && a.Zone() != "" {
			err = errors.New("a zone is not allowed")
		}
		n = netip.PrefixFrom(a, a.BitLen())
	}
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a network: want a CIDR such as 10.0.0.0/8 or an address such as 127.0.0.1", s)
	}
	if m := n.Masked(); m != n {
		return netip.Prefix{}, fmt.Errorf("%q has bits set past its prefix length: did you mean %s?", s, m)
	}
	return n, nil
}
