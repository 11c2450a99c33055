package api

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/store"
)

// The Host allow-list, against DNS rebinding.
//
// A page in a browser on the operator's machine can make a name of its
// own (attacker.example) resolve to 127.0.0.1, and then call a node there
// as if it were its own origin: the browser sends Host: attacker.example
// and lets the page read the answers. A node without auth, which the
// default local setup is, would then act for it. So a request is served
// only when its Host names the node:
//
//   - an IP literal, of any kind (127.0.0.1, 10.0.0.7, [::1]): rebinding
//     needs a DNS name, and monitoring often reaches a node by address;
//   - localhost or a name under .localhost (RFC 6761: always loopback);
//   - one of the node's own names (Config.OwnHosts: the host of its
//     --http-addr, and of its --public-url);
//   - one of Config.AllowedHosts (--allowed-hosts): a name, or *.suffix
//     for every name under suffix.
//
// Any other Host is answered 421 Misdirected Request, in the
// envelope of docs/errors.md with code FORBIDDEN and the refused name as `host`, on every
// route but the node-to-node endpoints under /internal/ (which other
// nodes call by whatever address they were given, and which the cluster
// key or node TLS authenticate).
//
// The check is on when auth is off (no ambient credential but the
// network stands between a page and the node), and whenever AllowedHosts
// is given, auth on or off. With auth on and no AllowedHosts it is off: a
// rebound page holds no token, so it can do nothing but read what
// /healthz, /metrics and the console's static files show anyone, and
// containers and Services keep reaching nodes by whatever name they
// have. AllowedHosts ["*"] turns it off in every case.
//
// With auth off, a request that changes state (any method but GET, HEAD
// and OPTIONS) sent by a browser page of another origin (its Origin, or
// Sec-Fetch-Site, says so) is refused 403 FORBIDDEN, whatever its Host: a
// page may POST to http://127.0.0.1:8080 without a preflight when its body
// has no Content-Type, and such a body is read as JSON. With auth on, a
// page cannot attach the token, and the check is off.

// hostCheck is the allow-list of one server.
type hostCheck struct {
	// on: Host is checked; origins: Origin is checked.
	on, origins bool
	names       map[string]bool
	suffixes    []string // ".example.com" for *.example.com
	cross       *http.CrossOriginProtection
}

// ParseAllowedHosts reads a comma-separated list of allowed hosts, as
// --allowed-hosts gives it: names, *.suffix, or * alone.
func ParseAllowedHosts(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	if _, err := newHostCheck(true, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// newHostCheck returns the check of a server whose auth is on or off.
func newHostCheck(authOn bool, allowed, own []string) (*hostCheck, error) {
	hc := &hostCheck{names: make(map[string]bool), origins: !authOn, cross: http.NewCrossOriginProtection()}
	hc.on = !authOn || len(allowed) > 0
	for _, a := range allowed {
		a = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(a), "."))
		switch {
		case a == "*":
			hc.on = false
		case a == "":
		case strings.HasPrefix(a, "*."):
			hc.suffixes = append(hc.suffixes, a[1:])
		case strings.ContainsAny(a, "*/:@ "):
			return nil, fmt.Errorf("allowed host %q: want a name (api.example.com), *.suffix or *, without scheme or port", a)
		default:
			hc.names[a] = true
		}
	}
	for _, o := range own {
		if h := hostOnly(o); h != "" {
			hc.names[h] = true
		}
	}
	return hc, nil
}

// hostOnly returns the lowercase host of a Host header or host:port,
// without port, brackets or a trailing dot.
func hostOnly(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	return strings.ToLower(h)
}

// allows reports whether host (a Host header) names this node.
func (hc *hostCheck) allows(host string) bool {
	h := hostOnly(host)
	if h == "" {
		return true // HTTP/1.0 without Host: no browser sends it
	}
	if before, _, ok := strings.Cut(h, "%"); ok { // an IPv6 zone
		h = before
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || hc.names[h] {
		return true
	}
	for _, s := range hc.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// middleware refuses a request whose Host is not allowed (421), or a
// cross-origin browser request that changes state (403), before routing.
func (hc *hostCheck) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	if !hc.on && !hc.origins {
		return next
	}
	return func(c echo.Context) error {
		r := c.Request()
		if strings.HasPrefix(r.URL.Path, "/internal/") {
			return next(c)
		}
		if hc.on && !hc.allows(r.Host) {
			return &Error{Code: store.CodeForbidden, status: http.StatusMisdirectedRequest,
				Message: fmt.Sprintf("this node does not answer to the name %q (a guard against DNS rebinding): reach it by IP address, localhost or one of its configured names, "+
					"or add the name to --allowed-hosts (CARMY_ALLOWED_HOSTS)", hostOnly(r.Host)),
				Extra: map[string]any{"host": hostOnly(r.Host)}}
		}
		if hc.origins {
			if err := hc.cross.Check(r); err != nil {
				return newError(store.CodeForbidden, fmt.Sprintf("a request from a browser page of another origin (%s) may not change state on a node without auth", originOf(r)))
			}
		}
		return next(c)
	}
}

// originOf names the origin a cross-origin request came from, as far as
// its headers tell.
func originOf(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
		return "Origin " + o
	}
	return "Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site")
}
