package egress_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/internal/egress"
)

// sendOnce makes one POST to url through rt and reports whether TrackSend
// says it was sent, and the request's error.
func sendOnce(t *testing.T, rt http.RoundTripper, url string) (bool, error) {
	t.Helper()
	ctx, send := egress.TrackSend(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return send.Sent(), err
}

func policyTransport(t *testing.T) *http.Transport {
	t.Helper()
	p, err := egress.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := p.Transport()
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func TestTrackSend(t *testing.T) {
	closed := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	// hangUp accepts, reads what comes for a moment, and closes.
	hangUp := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Read(make([]byte, 4096))
				c.Close()
			}
		}()
		return ln.Addr().String()
	}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") }))
	t.Cleanup(plain.Close)

	tests := []struct {
		name     string
		url      func(t *testing.T) string
		wantSent bool
		wantErr  bool
	}{
		{"refused", func(t *testing.T) string { return "http://" + closed(t) + "/" }, false, true},
		{"no such host", func(*testing.T) string { return "http://carmy-test.invalid/" }, false, true},
		{"answered", func(*testing.T) string { return plain.URL }, true, false},
		{"not TLS: the handshake fails, its bytes are not the request's", func(*testing.T) string {
			return strings.Replace(plain.URL, "http://", "https://", 1)
		}, false, true},
		{"closed after reading the request", func(t *testing.T) string { return "http://" + hangUp(t) + "/" }, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent, err := sendOnce(t, policyTransport(t), tt.url(t))
			if sent != tt.wantSent || (err != nil) != tt.wantErr {
				t.Fatalf("sent = %v, err = %v; want sent %v, an error %v", sent, err, tt.wantSent, tt.wantErr)
			}
		})
	}
}

// Over TLS the counting connection is beneath the TLS one: the handshake
// happens before the request is given its connection, so a request is
// sent only once its own bytes are written.
func TestTrackSendOverTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") }))
	t.Cleanup(srv.Close)
	tr := policyTransport(t)
	tr.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	sent, err := sendOnce(t, tr, srv.URL)
	if err != nil || !sent {
		t.Fatalf("sent = %v, err = %v; want sent", sent, err)
	}
	// The certificate is not trusted: the handshake fails, nothing sent.
	untrusting := policyTransport(t)
	sent, err = sendOnce(t, untrusting, srv.URL)
	if err == nil || sent {
		t.Fatalf("untrusted certificate: sent = %v, err = %v; want an error, not sent", sent, err)
	}
}

// A connection that does not count its writes reads as sent once the
// request was given it: the doubt falls on "sent".
func TestTrackSendUncountedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	tr := &http.Transport{DialContext: (&net.Dialer{}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	sent, err := sendOnce(t, tr, "http://"+ln.Addr().String()+"/")
	if err == nil || !sent {
		t.Fatalf("sent = %v, err = %v; want an error, sent", sent, err)
	}
	if !egress.Traceable(tr) || egress.Traceable(roundTripFunc(nil)) {
		t.Fatal("Traceable: want true for an *http.Transport only")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
