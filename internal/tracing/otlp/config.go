package otlp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The environment variables of the exporter, each also read in its
// OTEL_EXPORTER_OTLP_TRACES_ form, which wins over the general one.
const (
	EnvHeaders     = "OTEL_EXPORTER_OTLP_HEADERS"
	EnvTimeout     = "OTEL_EXPORTER_OTLP_TIMEOUT"
	EnvCompression = "OTEL_EXPORTER_OTLP_COMPRESSION"
	EnvCertificate = "OTEL_EXPORTER_OTLP_CERTIFICATE"
	EnvClientCert  = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"
	EnvClientKey   = "OTEL_EXPORTER_OTLP_CLIENT_KEY"
)

// The exporter's defaults, as the OpenTelemetry specification sets them.
const (
	// DefaultTimeout bounds one export, its retries included.
	DefaultTimeout = 10 * time.Second
	// DefaultBackoff is the first wait before retrying an answer that
	// says to retry without saying when (Retry-After).
	DefaultBackoff = time.Second
	// tracesPath is where spans go under OTEL_EXPORTER_OTLP_ENDPOINT.
	tracesPath = "v1/traces"
)

// Config is where and how the exporter sends spans.
type Config struct {
	// URL is the full URL spans are posted to (http or https).
	URL string
	// Header is added to every export (OTEL_EXPORTER_OTLP_HEADERS).
	Header http.Header
	// Timeout bounds one export, retries included; DefaultTimeout if 0.
	Timeout time.Duration
	// Gzip compresses the body of exports.
	Gzip bool
	// TLS is the TLS configuration of an https URL: the CAs to trust
	// (nil: the system's) and a client certificate; nil for the default.
	TLS *tls.Config
	// Resource is what the spans are of: the resource's attributes and
	// the instrumentation scope.
	Resource Resource
	// Backoff is the first wait before a retry the receiver did not time
	// (no Retry-After); each next one doubles, up to 32 times it.
	// DefaultBackoff if 0.
	Backoff time.Duration
}

// ConfigFromEnv reads the exporter's Config from the OTEL_EXPORTER_OTLP_*
// variables getenv gives (and the files they name, through readFile): the
// endpoint (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, or
// OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended to its path), the
// protocol (http/protobuf only), headers, timeout (milliseconds),
// compression (gzip or none), the CA certificate file and a client
// certificate and key. Any value it cannot use is an error, not a
// default: tracing that is asked for is set up as asked or not at all.
func ConfigFromEnv(getenv func(string) string, readFile func(string) ([]byte, error)) (Config, error) {
	var cfg Config
	env := func(name string) (value, from string) {
		traces := strings.Replace(name, "OTEL_EXPORTER_OTLP_", "OTEL_EXPORTER_OTLP_TRACES_", 1)
		if v := strings.TrimSpace(getenv(traces)); v != "" {
			return v, traces
		}
		return strings.TrimSpace(getenv(name)), name
	}
	if p, from := env(EnvProtocol); p != "" && p != "http/protobuf" {
		return cfg, fmt.Errorf("%s=%q: carmy exports traces over OTLP/HTTP only (http/protobuf)", from, p)
	}
	u, err := endpoint(getenv)
	if err != nil {
		return cfg, err
	}
	cfg.URL = u.String()
	if h, from := env(EnvHeaders); h != "" {
		if cfg.Header, err = parseHeaders(h); err != nil {
			return cfg, fmt.Errorf("%s: %w", from, err)
		}
	}
	if t, from := env(EnvTimeout); t != "" {
		ms, err := strconv.ParseInt(t, 10, 64)
		if err != nil || ms <= 0 || ms > int64(time.Hour/time.Millisecond) {
			return cfg, fmt.Errorf("%s=%q: want a number of milliseconds, from 1 to 3600000", from, t)
		}
		cfg.Timeout = time.Duration(ms) * time.Millisecond
	}
	switch c, from := env(EnvCompression); c {
	case "", "none":
	case "gzip":
		cfg.Gzip = true
	default:
		return cfg, fmt.Errorf("%s=%q: want gzip or none", from, c)
	}
	if cfg.TLS, err = tlsFromEnv(env, readFile); err != nil {
		return cfg, err
	}
	if cfg.TLS != nil && u.Scheme != "https" {
		return cfg, fmt.Errorf("certificates for an OTLP endpoint that is not https (%s://%s)", u.Scheme, u.Host)
	}
	return cfg, nil
}

// endpoint is the URL spans are posted to: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// as is (path / when it has none), or OTEL_EXPORTER_OTLP_ENDPOINT with
// v1/traces appended to its path.
func endpoint(getenv func(string) string) (*url.URL, error) {
	name, raw := EnvTracesEndpoint, strings.TrimSpace(getenv(EnvTracesEndpoint))
	if raw == "" {
		name, raw = EnvEndpoint, strings.TrimSpace(getenv(EnvEndpoint))
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// raw is not quoted: a URL may hold a password
		return nil, fmt.Errorf("%s: want an http:// or https:// URL with a host", name)
	}
	if name == EnvEndpoint {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/" + tracesPath
		u.RawPath = ""
	} else if u.Path == "" {
		u.Path = "/"
	}
	return u, nil
}

// parseHeaders reads OTEL_EXPORTER_OTLP_HEADERS: key=value pairs
// separated by commas, values percent-decoded, spaces around both
// trimmed.
func parseHeaders(s string) (http.Header, error) {
	h := http.Header{}
	for i, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || !validHeaderName(k) { // the entry is not quoted: it may hold a secret
			return nil, fmt.Errorf("entry %d is not key=value with a header name for key", i+1)
		}
		value, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("the value of %s is not percent-encoded", k)
		}
		h.Add(k, value)
	}
	return h, nil
}

// validHeaderName reports whether k is an HTTP token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		ok := c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.ContainsRune("!#$%&'*+-.^_`|~", c))
		if !ok {
			return false
		}
	}
	return true
}

// tlsFromEnv reads the CA certificate file and the client certificate
// and key (both or neither); nil when none is set.
func tlsFromEnv(env func(string) (string, string), readFile func(string) ([]byte, error)) (*tls.Config, error) {
	ca, caFrom := env(EnvCertificate)
	cert, certFrom := env(EnvClientCert)
	key, keyFrom := env(EnvClientKey)
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := readFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caFrom, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s=%s: no PEM certificate in it", caFrom, ca)
		}
	}
	if cert == "" && key == "" {
		return cfg, nil
	}
	if cert == "" || key == "" {
		return nil, errors.New(certFrom + " and " + keyFrom + ": set both or neither")
	}
	certPEM, err := readFile(cert)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFrom, err)
	}
	keyPEM, err := readFile(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFrom, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s and %s: %w", certFrom, keyFrom, err)
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}
