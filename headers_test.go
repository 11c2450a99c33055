package carmy_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/tests/testutil"
)

// headerLimit is the limit the tests below configure.
const headerLimit = 4 << 10

// rawRequest sends a GET of /healthz with pad bytes of one header on conn,
// as a client that ignores limits would, and reads the answer.
func rawRequest(t *testing.T, conn net.Conn, pad int) (*http.Response, []byte) {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// The server may answer and close before it has read everything:
	// a failed write is expected then, and the answer is what counts.
	go func() {
		_, _ = fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: %s\r\n\r\n", strings.Repeat("a", pad))
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to %d bytes of headers: %v", pad, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body of the answer: %v", err)
	}
	return resp, body
}

// want431 checks the envelope of docs/errors.md with INVALID_REQUEST and status 431.
func want431(t *testing.T, what string, resp *http.Response, body []byte) {
	t.Helper()
	var env struct {
		Error map[string]any `json:"error"`
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
		json.Unmarshal(body, &env) != nil || env.Error["code"] != "INVALID_REQUEST" || env.Error["message"] == "" {
		t.Fatalf("%s: %d %q %q, want 431 with the INVALID_REQUEST envelope", what, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if msg, _ := env.Error["message"].(string); !strings.Contains(msg, fmt.Sprint(headerLimit)) {
		t.Errorf("%s: the message %q does not name the limit %d", what, msg, headerLimit)
	}
}

// TestOversizedHeadersAre431 checks headers over the limit, a little
// (refused by the API) and far (refused by net/http before the API sees
// them): both are 431 with the envelope, over a raw TCP connection.
func TestOversizedHeadersAre431(t *testing.T) {
	app := newApp(t)
	addr := testutil.Serve(t, app, api.Config{Timeouts: api.Timeouts{HeaderBytes: headerLimit}})
	for _, tc := range []struct {
		name string
		pad  int
	}{
		{"just over the limit", headerLimit},
		{"twice the limit", 2 * headerLimit},
		{"far over the limit", 64 * headerLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			resp, body := rawRequest(t, conn, tc.pad)
			want431(t, tc.name, resp, body)
		})
	}
	// Within the limit, the same request is served; so is the next one on
	// a connection whose headers were refused by the API.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if resp, body := rawRequest(t, conn, headerLimit-200); resp.StatusCode != http.StatusOK {
		t.Fatalf("headers within the limit: %d %s", resp.StatusCode, body)
	}
	// With net/http's client, too.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/healthz", nil)
	req.Header.Set("X-Padding", strings.Repeat("a", 16<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want431(t, "16 KiB of headers over a 4 KiB limit", resp, body)
}

// TestOversizedHeadersAre431OverTLS is TestOversizedHeadersAre431 on a
// node whose API is HTTPS: the answer net/http writes itself is
// replaced inside the TLS connection, and a request within the limit
// still sees the connection as TLS.
func TestOversizedHeadersAre431OverTLS(t *testing.T) {
	app := newApp(t)
	cert := selfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		done <- app.Serve(ctx, ln, api.Config{Logger: quietLogger(), Timeouts: api.Timeouts{HeaderBytes: headerLimit},
			TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	dial := func() net.Conn {
		t.Helper()
		// The test's own certificate: the connection is what is tested.
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	if resp, body := rawRequest(t, dial(), 100); resp.StatusCode != http.StatusOK {
		t.Fatalf("headers within the limit over TLS: %d %s", resp.StatusCode, body)
	}
	for _, pad := range []int{headerLimit, 64 * headerLimit} {
		resp, body := rawRequest(t, dial(), pad)
		want431(t, fmt.Sprintf("%d bytes of headers over TLS", pad), resp, body)
	}
}

// selfSigned returns a certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "carmy test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
