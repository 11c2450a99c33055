// Package netaddr holds address checks that several packages share.
package netaddr

import "net"

// IsLoopback reports whether addr (host:port) names a loopback host:
// localhost, 127.0.0.0/8 or ::1. An empty host (all interfaces) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
