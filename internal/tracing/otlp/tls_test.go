package otlp_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/internal/tracing/otlp"
)

// TestExporterOverTLS: OTEL_EXPORTER_OTLP_CERTIFICATE is the CA the
// receiver's certificate is checked against, and the client certificate
// and key are presented to a receiver that requires one.
func TestExporterOverTLS(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	caPEM, caKey, err := certs.NewCA("otlp test CA", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	issue := func(name string) tls.Certificate {
		certPEM, keyPEM, err := certs.NewNodeCert(caPEM, caKey, name, nil, nil, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		write(name+".pem", certPEM)
		write(name+"-key.pem", keyPEM)
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	caFile := write("ca.pem", caPEM)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)

	rcv := &receiver{}
	rcv.Server = httptest.NewUnstartedServer(rcv.handler(nil))
	rcv.TLS = &tls.Config{Certificates: []tls.Certificate{issue("receiver")}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	rcv.StartTLS()
	t.Cleanup(rcv.Close)
	issue("carmy")

	export := func(env map[string]string) error {
		env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = rcv.URL + "/v1/traces"
		cfg, err := otlp.ConfigFromEnv(func(k string) string { return env[k] }, os.ReadFile)
		if err != nil {
			t.Fatalf("ConfigFromEnv: %v", err)
		}
		return newExporter(t, cfg).Export(t.Context(), twoSpans())
	}
	if err := export(map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": caFile,
		"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": filepath.Join(dir, "carmy.pem"),
		"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY":         filepath.Join(dir, "carmy-key.pem")}); err != nil {
		t.Errorf("with the CA and a client certificate: %v", err)
	}
	if n := len(rcv.requests(t)); n != 1 {
		t.Errorf("%d requests received, want 1", n)
	}
	if err := export(map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": caFile}); err == nil {
		t.Errorf("without a client certificate: exported to a receiver that requires one")
	}
	if err := export(map[string]string{}); err == nil {
		t.Errorf("without the CA: exported to a receiver whose certificate the system does not trust")
	}
}
