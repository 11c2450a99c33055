package otlp_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/tracing/otlp"
)

// TestConfigFromEnv: the endpoint, headers, timeout and compression the
// OTEL_EXPORTER_OTLP_* variables set, the _TRACES_ forms winning.
func TestConfigFromEnv(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		url     string
		header  http.Header
		timeout time.Duration
		gzip    bool
	}{
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, url: "http://127.0.0.1:4318/v1/traces"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector/otlp/"}, url: "https://collector/otlp/v1/traces"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://tempo:4318"}, url: "http://tempo:4318/"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:2/custom?x=1"},
			url: "http://b:2/custom?x=1"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_HEADERS": " api-key = a%20b%2Cc , X-Tenant=7", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"},
			url: "http://a/v1/traces", header: http.Header{"Api-Key": {"a b,c"}, "X-Tenant": {"7"}}, timeout: 2500 * time.Millisecond, gzip: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_EXPORTER_OTLP_HEADERS": "a=1",
			"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=2", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
			"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "100"},
			url: "http://a/v1/traces", header: http.Header{"B": {"2"}}, timeout: 100 * time.Millisecond},
	} {
		cfg, err := otlp.ConfigFromEnv(func(k string) string { return c.env[k] }, noFiles)
		if err != nil {
			t.Errorf("%v: %v", c.env, err)
			continue
		}
		if cfg.URL != c.url || cfg.Timeout != c.timeout || cfg.Gzip != c.gzip || !equalHeader(cfg.Header, c.header) || cfg.TLS != nil {
			t.Errorf("%v: %+v, want url %s header %v timeout %s gzip %v", c.env, cfg, c.url, c.header, c.timeout, c.gzip)
		}
	}
}

// TestConfigFromEnvRefuses: a value the exporter cannot use stops it,
// and the error names the variable without quoting a secret.
func TestConfigFromEnvRefuses(t *testing.T) {
	const ep = "OTEL_EXPORTER_OTLP_ENDPOINT"
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{ep: "http://a", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{map[string]string{ep: "http://a", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{map[string]string{ep: "127.0.0.1:4318"}, ep},
		{map[string]string{ep: "grpc://u:hunter2@a:4317"}, ep},
		{map[string]string{ep: "http://a", "OTEL_EXPORTER_OTLP_HEADERS": "Bearer hunter2"}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{map[string]string{ep: "http://a", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "k=hunter2%zz"}, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"},
		{map[string]string{ep: "http://a", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{map[string]string{ep: "http://a", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "OTEL_EXPORTER_OTLP_COMPRESSION"},
		{map[string]string{ep: "http://a", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/no/such/ca.pem"}, "OTEL_EXPORTER_OTLP_CERTIFICATE"},
		{map[string]string{ep: "https://a", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/c.pem"}, "OTEL_EXPORTER_OTLP_CLIENT_KEY"},
	} {
		_, err := otlp.ConfigFromEnv(func(k string) string { return c.env[k] }, noFiles)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%v: %v, want an error naming %s (and no secret)", c.env, err, c.want)
		}
	}
}

func noFiles(name string) ([]byte, error) { return nil, errors.New("open " + name + ": no such file") }

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, "\n") != strings.Join(b[k], "\n") {
			return false
		}
	}
	return true
}
