package api

import (
	"net/http"
	"net/netip"
	"strings"
)

// Trusted proxies.
//
// The failed-authentication lockout (authguard.go) keys on the client's
// address. Behind a reverse proxy every request comes from the proxy's
// address, so one client that guesses tokens would lock every client out.
// A request whose peer is in Config.TrustedProxies is keyed instead on the
// address the proxies report in X-Forwarded-For: read from the right (the
// entry the nearest proxy appended), past every entry that is itself a
// trusted proxy, the first that is not is the client. A client can put
// anything at the left of the header, but not past a trusted proxy, which
// appends the address it saw. An entry that is not an address stops the
// walk: the request is keyed on the last trusted hop. A request whose peer
// is not trusted is keyed on the peer, whatever its headers say.

// clientAddrs resolves a request's client address.
type clientAddrs struct {
	trusted []netip.Prefix
}

// addr returns the client address of r: its peer's, or through trusted
// proxies the one their X-Forwarded-For names. ok is false when the peer
// address does not parse.
func (ca clientAddrs) addr(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	peer := ap.Addr().Unmap()
	if !ca.isTrusted(peer) {
		return peer, true
	}
	values := r.Header.Values("X-Forwarded-For")
	client := peer
	for i := len(values) - 1; i >= 0; i-- {
		hops := strings.Split(values[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			a, ok := parseHop(hops[j])
			if !ok {
				return client, true
			}
			client = a
			if !ca.isTrusted(a) {
				return a, true
			}
		}
	}
	return client, true
}

func (ca clientAddrs) isTrusted(a netip.Addr) bool {
	for _, p := range ca.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHop reads one entry of X-Forwarded-For: an address, with or
// without a port (1.2.3.4, 1.2.3.4:5678, 2001:db8::1, [2001:db8::1]:80).
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}

// source returns the key of r's client address: the address of an IPv4
// client, the /64 of an IPv6 one (one host usually holds a whole /64),
// overflowSource when the peer address does not parse.
func (ca clientAddrs) source(r *http.Request) netip.Prefix {
	addr, ok := ca.addr(r)
	if !ok {
		return overflowSource
	}
	if addr.Is4() {
		return netip.PrefixFrom(addr, 32)
	}
	p, err := addr.WithZone("").Prefix(64)
	if err != nil {
		return overflowSource
	}
	return p
}

// ParseTrustedProxies reads a comma-separated list of CIDRs or addresses
// (an address is its own /32 or /128), as --trusted-proxies gives it.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, &trustedProxyError{part}
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

type trustedProxyError struct{ part string }

func (e *trustedProxyError) Error() string {
	return "trusted proxy " + `"` + e.part + `"` + ": want a CIDR (10.0.0.0/8) or an address"
}
