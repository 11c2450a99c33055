package egress

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
)

// timeoutError is an error that says it is a timeout, like net/http's
// TLS handshake timeout.
type timeoutError string

func (e timeoutError) Error() string { return string(e) }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// asFromClient wraps err the way http.Client.Do does, with a URL full of
// secrets.
func asFromClient(err error) error {
	return &url.Error{Op: "Post", URL: "http://user:SECRET@upstream.example:8080/orders?token=SECRET", Err: err}
}

func dialErr(err error) error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 80}, Err: err}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{dialErr(&DeniedError{Addr: netip.MustParseAddr("169.254.169.254"), Reason: "a cloud metadata address"}), "the upstream's address is not allowed by the egress policy"},
		{dialErr(&net.DNSError{Err: "no such host", Name: "upstream.example", IsNotFound: true}), "DNS lookup failed: no such host"},
		{dialErr(&net.DNSError{Err: "i/o timeout", Name: "upstream.example", IsTimeout: true}), "DNS lookup timed out"},
		{dialErr(&net.DNSError{Err: "server misbehaving", Name: "upstream.example"}), "DNS lookup failed"},
		{dialErr(os.NewSyscallError("connect", syscall.ECONNREFUSED)), "connection refused"},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, "the connection was reset"},
		{dialErr(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), "host unreachable"},
		{dialErr(os.NewSyscallError("connect", syscall.ENETUNREACH)), "network unreachable"},
		{dialErr(os.NewSyscallError("connect", syscall.ETIMEDOUT)), "timed out connecting"},
		{dialErr(timeoutError("i/o timeout")), "timed out connecting"},
		{timeoutError("net/http: TLS handshake timeout"), "timed out during the TLS handshake"},
		{fmt.Errorf("read: %w", timeoutError("i/o timeout")), "timed out"},
		{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, "the upstream's TLS certificate was not accepted"},
		{x509.HostnameError{Host: "upstream.example", Certificate: &x509.Certificate{}}, "the upstream's TLS certificate was not accepted"},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, "the upstream does not speak TLS"},
		{http.ErrSchemeMismatch, "the upstream does not speak TLS"},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: handshake failure")}, "the TLS handshake failed"},
		{io.EOF, "the connection was closed before the answer was complete"},
		{io.ErrUnexpectedEOF, "the connection was closed before the answer was complete"},
		{dialErr(errors.New("something else")), "could not connect"},
		{errors.New("something else"), "the request failed"},
	}
	for _, tt := range tests {
		for _, err := range []error{tt.err, asFromClient(tt.err)} {
			got := Describe(err)
			if got != tt.want {
				t.Errorf("Describe(%v) = %q, want %q", err, got, tt.want)
			}
			for _, leak := range []string{"SECRET", "upstream.example", "10.0.0.1", "169.254"} {
				if strings.Contains(got, leak) {
					t.Errorf("Describe(%v) = %q, which names %q", err, got, leak)
				}
			}
		}
	}
	if got := Describe(nil); got != "no failure" {
		t.Errorf("Describe(nil) = %q", got)
	}
}

func TestDetail(t *testing.T) {
	r := NewRedactor(nil, map[string]string{"X-Api-Key": "key-SECRET"})
	err := asFromClient(dialErr(errors.New("the upstream said key-SECRET")))
	got := Detail(err, r)
	if want := "dial tcp 10.0.0.1:80: the upstream said [redacted]"; got != want {
		t.Errorf("Detail = %q, want %q", got, want)
	}
	if got := Detail(errors.New("plain"), nil); got != "plain" {
		t.Errorf("Detail without a redactor = %q", got)
	}
	if got := Detail(nil, r); got != "" {
		t.Errorf("Detail(nil) = %q", got)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pw@h.example:8443/a/b?token=x&y=1#frag": "https://[redacted]@h.example:8443/a/b?[redacted]",
		"http://127.0.0.1:9/orders":                           "http://127.0.0.1:9/orders",
		"http://h/?":                                          "http://h/?[redacted]",
		"http://user@h/a%2Fb":                                 "http://[redacted]@h/a%2Fb",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := RedactURL(u); got != want {
			t.Errorf("RedactURL(%s) = %q, want %q", in, got, want)
		}
	}
	if got := RedactURL(nil); got != "" {
		t.Errorf("RedactURL(nil) = %q", got)
	}
}

func TestRedactor(t *testing.T) {
	u := &url.URL{Scheme: "http", User: url.UserPassword("carmy", "pass+word/1"), Host: "h", Path: "/x", RawQuery: "token=tok%20SECRET&short=abc&flag"}
	r := NewRedactor(u, map[string]string{"Authorization": "Bearer bearer-SECRET", "Accept": "json"}, "extra-SECRET")
	for in, want := range map[string]string{
		"token=tok%20SECRET&short=abc&flag":   "[redacted]",
		"got tok SECRET and tok+SECRET":       "got [redacted] and [redacted]",
		"auth Bearer bearer-SECRET":           "auth [redacted]",
		"bare bearer-SECRET":                  "bare [redacted]",
		"user carmy:pass+word/1 pass+word/1":  "user carmy:[redacted] [redacted]",
		"userinfo carmy:pass+word%2F1":        "userinfo [redacted]",
		"escaped pass%2Bword%2F1":             "escaped [redacted]",
		"extra-SECRET":                        "[redacted]",
		"short abc, json and Bearer are kept": "short abc, json and Bearer are kept",
	} {
		if got := r.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	if r := NewRedactor(nil, nil, "abc"); r != nil || r.Redact("abc") != "abc" {
		t.Errorf("a redactor of short values only = %v, want nil (redacting nothing)", r)
	}
}
