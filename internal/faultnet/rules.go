package faultnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Rules are the peers one node is cut off from (see the package doc).
// Each entry is an IP address or a host name; Set resolves names and
// normalises addresses (an IPv4-mapped IPv6 address becomes IPv4), and
// Filter.Rules returns the resolved, sorted, de-duplicated addresses.
type Rules struct {
	// DropIn lists the peers that cannot reach this node.
	DropIn []string `json:"drop_in"`
	// DropOut lists the peers this node cannot reach.
	DropOut []string `json:"drop_out"`
}

// lookupTimeout bounds the resolution of one host name in Set.
const lookupTimeout = 5 * time.Second

// addrSet is a set of normalised peer IPs.
type addrSet map[netip.Addr]struct{}

func (s addrSet) has(ip netip.Addr) bool {
	_, ok := s[ip]
	return ok
}

// strings returns the set's addresses, sorted.
func (s addrSet) strings() []string {
	ips := make([]netip.Addr, 0, len(s))
	for ip := range s {
		ips = append(ips, ip)
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// resolveAll turns entries (IPs or host names) into a set of IPs.
func resolveAll(ctx context.Context, field string, entries []string) (addrSet, error) {
	set := make(addrSet, len(entries))
	for _, e := range entries {
		ips, err := resolve(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("faultnet: %s entry %q: %w", field, e, err)
		}
		for _, ip := range ips {
			set[ip] = struct{}{}
		}
	}
	return set, nil
}

// resolve returns the normalised IPs an entry names.
func resolve(ctx context.Context, entry string) ([]netip.Addr, error) {
	entry = strings.TrimSpace(entry)
	if entry == "" {
		return nil, errors.New("empty address")
	}
	if ip, err := netip.ParseAddr(entry); err == nil {
		return []netip.Addr{normalise(ip)}, nil
	}
	if strings.ContainsAny(entry, ":/ ") {
		return nil, errors.New("want an IP address or a host name (no port, no prefix)")
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", entry)
	if err != nil {
		return nil, fmt.Errorf("resolving: %w", err)
	}
	if len(ips) == 0 {
		return nil, errors.New("resolving: no address")
	}
	for i, ip := range ips {
		ips[i] = normalise(ip)
	}
	return ips, nil
}

// normalise makes equal addresses compare equal: IPv4-mapped IPv6 becomes
// IPv4 and the zone is dropped.
func normalise(ip netip.Addr) netip.Addr {
	return ip.Unmap().WithZone("")
}

// addrIP returns the normalised IP of a connection's or packet's address.
func addrIP(a net.Addr) (netip.Addr, bool) {
	switch a := a.(type) {
	case *net.TCPAddr:
		if a == nil {
			return netip.Addr{}, false
		}
		ip, ok := netip.AddrFromSlice(a.IP)
		return normalise(ip), ok
	case *net.UDPAddr:
		if a == nil {
			return netip.Addr{}, false
		}
		ip, ok := netip.AddrFromSlice(a.IP)
		return normalise(ip), ok
	case nil:
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return normalise(ap.Addr()), true
}
