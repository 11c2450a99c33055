package egress

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
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
