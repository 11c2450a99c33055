package api

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// The node's base URL, as documents that name the node give it (the /mcp
// protected-resource metadata and the resource_metadata of its 401,
// docs/mcp.md): Config.PublicURL when set, else the address of the listener
// the request came in on (the connection's local address, which the
// client cannot choose), over https when the API serves TLS. Never the
// request's Host, which the client chooses: reflected into the document,
// it would let a rebound page, or a proxy's confused client, point an MCP
// client at another server for its tokens.

// ValidatePublicURL checks a public URL as --public-url gives it: http or
// https, a host, no path beyond "/", no query, fragment or user info.
func ValidatePublicURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("public URL %q: %w", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("public URL %q: want http:// or https://", s)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("public URL %q: no host", s)
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.User != nil:
		return fmt.Errorf("public URL %q: want scheme and host (and port) only, as https://carmy.example.com", s)
	}
	return nil
}

// hostOfURL returns the host:port of a valid public URL ("" for none).
func hostOfURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Host
}

// baseURL returns the function that gives a request's base URL: the
// public URL, or the listener's address.
func baseURL(public string, tls bool) func(*http.Request) string {
	if public != "" {
		public = strings.TrimSuffix(public, "/")
		return func(*http.Request) string { return public }
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return func(r *http.Request) string {
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
			return scheme + "://" + local.String()
		}
		// Not served by net/http (a test calling ServeHTTP): no address
		// to give but the loopback one.
		return scheme + "://127.0.0.1"
	}
}
