// Package netaddr holds address checks that several packages share.
package netaddr

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

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

// BaseURL turns a node's address as a user gives it on the command line
// (host:port, or an http:// or https:// URL) into the base URL requests
// are made against, without a trailing slash: "127.0.0.1:8080" is
// "http://127.0.0.1:8080". The error quotes addr and says what is wanted;
// callers prefix the flag's name.
func BaseURL(addr string) (string, error) {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		u, err := url.Parse(addr)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("%q: want host:port or an http:// URL", addr)
		}
		return strings.TrimSuffix(u.String(), "/"), nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("%q: want host:port (e.g. 127.0.0.1:8080) or an http:// URL", addr)
	}
	return "http://" + addr, nil
}
