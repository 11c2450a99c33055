package egress

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
)

// Describe names the kind of failure err is, for a message a tenant may
// read: "connection refused", "DNS lookup failed", "timed out during the
// TLS handshake", … It never repeats err's text, which may hold the URL
// (a *url.Error does, query string and userinfo included), an address or
// a host name; the detail belongs in the node's log (see Detail).
func Describe(err error) string {
	var (
		denied  *DeniedError
		dnsErr  *net.DNSError
		opErr   *net.OpError
		certErr *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		record  tls.RecordHeaderError
		timeout = timeoutIn(err)
	)
	switch {
	case err == nil:
		return "no failure"
	case errors.As(err, &denied):
		return "the upstream's address is not allowed by the egress policy"
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout {
			return "DNS lookup timed out"
		}
		if dnsErr.IsNotFound {
			return "DNS lookup failed: no such host"
		}
		return "DNS lookup failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "the connection was reset"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable"
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable"
	case errors.Is(err, syscall.ETIMEDOUT):
		return "timed out connecting"
	case errors.As(err, &certErr), errors.As(err, &unknown), errors.As(err, &host), errors.As(err, &invalid):
		return "the upstream's TLS certificate was not accepted"
	case errors.Is(err, http.ErrSchemeMismatch), errors.As(err, &record):
		return "the upstream does not speak TLS"
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		return "the TLS handshake failed"
	case timeout != nil:
		switch {
		case strings.Contains(timeout.Error(), "TLS handshake"): // net/http's tlsHandshakeTimeoutError
			return "timed out during the TLS handshake"
		case errors.As(err, &opErr) && opErr.Op == "dial":
			return "timed out connecting"
		}
		return "timed out"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection was closed before the answer was complete"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return "could not connect"
	}
	return "the request failed"
}

// timeoutIn returns the first error of err's chain that says it is a
// timeout. errors.As would stop at the first that has the method (a
// *url.Error has it), whatever it answers.
func timeoutIn(err error) error {
	for ; err != nil; err = errors.Unwrap(err) {
		if t, ok := err.(interface{ Timeout() bool }); ok && t.Timeout() {
			return err
		}
	}
	return nil
}

// Detail is err's text for the node's log: the error a *url.Error wraps
// (without the URL it names), with the values of r redacted.
func Detail(err error, r *Redactor) string {
	if err == nil {
		return ""
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return r.Redact(err.Error())
}

// RedactURL returns u for a log line: scheme, host and path; userinfo
// and query, where secrets are usually put, are replaced by
// "[redacted]", and the fragment dropped.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	s := v.String()
	if u.User != nil {
		s = strings.Replace(s, "//", "//[redacted]@", 1)
	}
	if u.RawQuery != "" || u.ForceQuery {
		s += "?[redacted]"
	}
	return s
}

// minSecret is the length below which a configured value is not taken
// for a secret by a Redactor: shorter ones ("1", "json", "true") would
// match ordinary text.
const minSecret = 6

// Redactor replaces configured values (header values, a URL's userinfo
// and query values) by "[redacted]" in text that came back from an
// upstream or from an error, so that an upstream echoing its request does
// not carry a secret into a record or a log line. A nil *Redactor
// redacts nothing. It is safe for concurrent use.
type Redactor struct {
	r *strings.Replacer
}

// NewRedactor returns a Redactor of the values given, of those of
// headers, and of the userinfo and query values of u (any may be nil).
// Each value is also redacted in its URL-escaped forms, and a header
// value of several words in each word after the first ("Bearer <token>":
// the token). Values shorter than six bytes are not redacted.
func NewRedactor(u *url.URL, headers map[string]string, values ...string) *Redactor {
	var secrets []string
	add := func(v string) {
		for _, s := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			if len(s) >= minSecret {
				secrets = append(secrets, s)
			}
		}
	}
	for _, v := range values {
		add(v)
	}
	for _, v := range headers {
		add(v)
		// "Bearer <token>", "Basic <credentials>": the words after the
		// first, which names a scheme.
		if words := strings.Fields(v); len(words) > 1 {
			for _, w := range words[1:] {
				add(w)
			}
		}
	}
	if u != nil {
		if u.User != nil {
			add(u.User.Username())
			if pw, ok := u.User.Password(); ok {
				add(pw)
			}
			add(u.User.String())
		}
		if u.RawQuery != "" {
			add(u.RawQuery)
			for _, vs := range u.Query() {
				for _, v := range vs {
					add(v)
				}
			}
		}
	}
	if len(secrets) == 0 {
		return nil
	}
	// Longest first, so that a value containing another is replaced whole.
	slices.SortFunc(secrets, func(a, b string) int {
		if c := cmp.Compare(len(b), len(a)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	secrets = slices.Compact(secrets)
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, "[redacted]")
	}
	return &Redactor{r: strings.NewReplacer(pairs...)}
}

// Redact returns s with every value of r replaced by "[redacted]".
func (r *Redactor) Redact(s string) string {
	if r == nil {
		return s
	}
	return r.r.Replace(s)
}
