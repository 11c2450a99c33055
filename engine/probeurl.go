package engine

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/carmyhq/carmy/internal/egress"
)

// A reconcile probe's URL is a template: {idempotency_key},
// {execution_id}, {request_id} and {fencing_token} stand for the
// execution's values. A value comes from a caller (a request_id is any
// visible ASCII), so it must never move the request off the template's
// shape: it stays inside the one path segment or query value it was put
// in, and the host never depends on it.

// probePlaceholders are the names a reconcile URL may hold.
var probePlaceholders = []string{"{idempotency_key}", "{execution_id}", "{request_id}", "{fencing_token}"}

// probeURL is a checked reconcile URL template.
type probeURL struct {
	tmpl string
	// authEnd: where the template's authority ends (its path begins).
	authEnd int
	// pathEnd: where the template's path ends (its query or fragment
	// begins); placeholders before it are path escaped, after it query
	// escaped.
	pathEnd int
	// scheme, user and host of the template, which no expansion changes.
	scheme, user, host string
	// segments: the template's path segments (split at "/"), which an
	// expansion keeps, one for one.
	segments []string
}

// parseProbeURL checks tmpl: an absolute http or https URL whose
// placeholders are all in its path or query; one in the scheme,
// userinfo, host or port (where a value would choose whom Carmy asks) or
// in the fragment (never sent) is an error. An error does not repeat the
// URL.
func parseProbeURL(tmpl string) (*probeURL, error) {
	notAbsolute := errors.New("http tool: reconcile: the url is not an absolute http or https URL")
	i := strings.Index(tmpl, "://")
	if i < 0 {
		return nil, notAbsolute
	}
	authEnd := len(tmpl)
	if j := strings.IndexAny(tmpl[i+3:], "/?#"); j >= 0 {
		authEnd = i + 3 + j
	}
	pathEnd := len(tmpl)
	if j := strings.IndexAny(tmpl[authEnd:], "?#"); j >= 0 {
		pathEnd = authEnd + j
	}
	fragment := ""
	if j := strings.IndexByte(tmpl[pathEnd:], '#'); j >= 0 {
		fragment = tmpl[pathEnd+j:]
	}
	switch {
	case hasProbePlaceholder(tmpl[:authEnd]):
		return nil, errors.New("http tool: reconcile: the url has a placeholder in its scheme, userinfo, host or port: " +
			"placeholders may stand only in the path or the query, so that an execution's values never choose the host")
	case hasProbePlaceholder(fragment):
		return nil, errors.New("http tool: reconcile: the url has a placeholder in its fragment, which is never sent: put it in the path or the query")
	}
	p := &probeURL{tmpl: tmpl, authEnd: authEnd, pathEnd: pathEnd, segments: strings.Split(tmpl[authEnd:pathEnd], "/")}
	u, err := url.Parse(p.expand(ProbeCall{ExecutionID: "exec_x", RequestID: "r", IdempotencyKey: "k", FencingToken: 1}))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Neither the URL nor url.Parse's error, which quotes it.
		return nil, notAbsolute
	}
	p.scheme, p.user, p.host = u.Scheme, u.User.String(), u.Host
	return p, nil
}

// String returns the template for an operator's eyes: its scheme, host
// and path, without its userinfo or query, which may hold secrets.
func (p *probeURL) String() string {
	s := p.scheme + "://" + p.host + p.tmpl[p.authEnd:p.pathEnd]
	if p.pathEnd < len(p.tmpl) && p.tmpl[p.pathEnd] == '?' {
		s += "?[redacted]"
	}
	return s
}

// hasProbePlaceholder reports whether s holds a placeholder.
func hasProbePlaceholder(s string) bool {
	for _, ph := range probePlaceholders {
		if strings.Contains(s, ph) {
			return true
		}
	}
	return false
}

// expand puts c's values in place of the placeholders: in the path each
// byte outside RFC 3986's unreserved set, and every ".", percent-encoded
// (so that a value is one segment, or part of one, and never a dot
// segment: ".." is %2E%2E, "a/b" is a%2Fb, "%2e" is %252e); in the query
// and fragment, query escaped (url.QueryEscape: a value stays one
// parameter's key or value).
func (p *probeURL) expand(c ProbeCall) string {
	values := [...]string{c.IdempotencyKey, c.ExecutionID, c.RequestID}
	fencing := strconv.FormatUint(c.FencingToken, 10)
	var path, query []string
	for i, v := range values {
		path = append(path, probePlaceholders[i], escapeSegment(v))
		query = append(query, probePlaceholders[i], url.QueryEscape(v))
	}
	path = append(path, probePlaceholders[3], fencing)
	query = append(query, probePlaceholders[3], fencing)
	return strings.NewReplacer(path...).Replace(p.tmpl[:p.pathEnd]) + strings.NewReplacer(query...).Replace(p.tmpl[p.pathEnd:])
}

// escapeSegment percent-encodes every byte of s but ALPHA, DIGIT, "-",
// "_" and "~": RFC 3986's unreserved set without ".", which is encoded
// too (%2E) so that no value can make or complete a dot segment.
func escapeSegment(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '~':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// checkEgress refuses p when its host is an IP address that the egress
// policy of allow refuses.
func (p *probeURL) checkEgress(allow []netip.Prefix) error {
	host := (&url.URL{Host: p.host}).Hostname()
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return nil // a name: checked on every address it resolves to, when connecting
	}
	policy, err := egress.New(allow)
	if err != nil {
		return fmt.Errorf("http tool: %w", err)
	}
	var denied *egress.DeniedError
	if err := policy.Check(addr); errors.As(err, &denied) {
		return fmt.Errorf("http tool: reconcile: url %s: its host %s is %s: the egress policy does not allow it", p, host, denied.Reason)
	}
	return nil
}

// check refuses u, the URL of an expanded probe request, unless it has
// the template's shape: the same scheme, userinfo and host, as many path
// segments as the template, and no dot segment ("." or "..") where the
// template's segment holds a placeholder. expand guarantees this; check is
// the defence in depth that keeps a probe's answer from being trusted
// when it was asked of another resource.
func (p *probeURL) check(u *url.URL) error {
	if u.Scheme != p.scheme || u.User.String() != p.user || u.Host != p.host {
		return errors.New("the probe's expanded url has another scheme, userinfo or host than its template")
	}
	segs := strings.Split(u.EscapedPath(), "/")
	if len(segs) != len(p.segments) {
		return fmt.Errorf("the probe's expanded url has another count of path segments (%d) than its template (%d)", len(segs)-1, len(p.segments)-1)
	}
	for i, s := range segs {
		if (s == "." || s == "..") && hasProbePlaceholder(p.segments[i]) {
			return fmt.Errorf("the probe's expanded url has a dot segment (path segment %d)", i)
		}
	}
	return nil
}
