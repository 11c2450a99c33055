package bench

import (
	"bufio"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestBenchAnswerFraming reads answers as a node, a proxy or a broken
// server may frame them, each followed by a second answer on the same
// connection: a kept-alive answer must be read to its exact end.
func TestBenchAnswerFraming(t *testing.T) {
	const next = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
	for _, tc := range []struct {
		name, raw string
		status    int
		replayed  bool
		body      string
		keep      bool
		err       error // errAnswerCut, or any error when errBad
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nIdempotent-Replayed: true\r\nContent-Length: 11\r\n\r\n{\"a\":\"b\"}\n\n", 200, true, "{\"a\":\"b\"}\n\n", true, nil},
		{"header case", "HTTP/1.1 200 OK\r\nidempotent-replayed:  true \r\ncontent-length:2\r\n\r\n{}", 200, true, "{}", true, nil},
		{"not replayed", "HTTP/1.1 200 OK\r\nIdempotent-Replayed: false\r\nContent-Length: 2\r\n\r\n{}", 200, false, "{}", true, nil},
		{"chunked", "HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4;ext=1\r\n\":1}\r\n0\r\nX-Trailer: 1\r\n\r\n", 409, false, `{"a":1}`, true, nil},
		{"close", "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}", 503, false, "{}", false, nil},
		{"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", 200, false, "{}", false, nil},
		{"up to the close", "HTTP/1.1 502 Bad Gateway\r\n\r\n<html>", 502, false, "<html>" + next, false, nil},
		{"cut body", "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n{}", 200, false, "", false, errAnswerCut},
		{"cut headers", "HTTP/1.1 200 OK\r\nContent-", 200, false, "", false, errAnswerCut},
		{"cut chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n{}", 200, false, "", false, errAnswerCut},
		{"nothing", "", 0, false, "", false, errAnswerCut},
		{"not http", "SSH-2.0-OpenSSH\r\n", 0, false, "", false, errBad},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 200, false, "", false, errBad},
		{"gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 200, false, "", false, errBad},
		{"continue", "HTTP/1.1 100 Continue\r\n\r\n", 100, false, "", false, errBad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.raw
			if tc.err == nil {
				raw += next
			}
			br := bufio.NewReader(strings.NewReader(raw))
			a, keep, err := readBenchAnswer(br, nil)
			switch {
			case tc.err == errBad && err == nil, tc.err == errAnswerCut && !errors.Is(err, errAnswerCut):
				t.Fatalf("err = %v, want %v", err, tc.err)
			case tc.err != nil:
				if keep {
					t.Errorf("keep = true after %v", err)
				}
				return
			case err != nil:
				t.Fatalf("err = %v", err)
			}
			if a.status != tc.status || a.replayed != tc.replayed || string(a.body) != tc.body || keep != tc.keep {
				t.Errorf("got %d replayed=%v %q keep=%v, want %d replayed=%v %q keep=%v",
					a.status, a.replayed, a.body, keep, tc.status, tc.replayed, tc.body, tc.keep)
			}
			if !keep {
				return
			}
			b, keep, err := readBenchAnswer(br, a.body[:0])
			if err != nil || b.status != 204 || len(b.body) != 0 || !keep {
				t.Errorf("the next answer = %d %q keep=%v %v, want 204 with no body", b.status, b.body, keep, err)
			}
		})
	}

	// An answer past maxAnswerRead is read up to it (and what the last
	// read brought); the connection, which holds the rest, is not kept.
	big := "HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n" + strings.Repeat("x", 2000000)
	a, keep, err := readBenchAnswer(bufio.NewReader(strings.NewReader(big)), nil)
	if err != nil || len(a.body) < maxAnswerRead || len(a.body) >= 2000000 || keep {
		t.Errorf("a 2 MB answer: %d bytes read, keep=%v, %v; want about %d and not kept", len(a.body), keep, err, maxAnswerRead)
	}
}

// errBad stands for any error but errAnswerCut in TestBenchAnswerFraming.
var errBad = errors.New("a malformed answer")

// TestBenchServerFraming runs the bench against servers that stream their
// answers (chunked), close every connection after an answer, and close
// idle ones: every call is still answered.
func TestBenchServerFraming(t *testing.T) {
	var n atomic.Int64
	chunked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"status":`)
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, `"completed"}`)
	}))
	t.Cleanup(chunked.Close)
	res := benchJSON(t, "--targets", strings.TrimPrefix(chunked.URL, "http://"), "--calls", "40", "--clients", "2")
	if res.Calls != 40 || res.Outcomes["replayed"] != 40 {
		t.Errorf("chunked answers: %d calls, outcomes %v; want 40 replayed", res.Calls, res.Outcomes)
	}

	closing := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/tools/call" { // not GET /metrics
			n.Add(1)
		}
		answerJSON(w, http.StatusOK, `{"status":"completed"}`)
	}))
	closing.Config.SetKeepAlivesEnabled(false)
	closing.Start()
	t.Cleanup(closing.Close)
	res = benchJSON(t, "--targets", closing.URL, "--calls", "30", "--clients", "3")
	if res.Calls != 30 || res.Outcomes["ran"] != 30 || n.Load() != 30 {
		t.Errorf("Connection: close: %d calls (%d served), outcomes %v; want 30 that ran", res.Calls, n.Load(), res.Outcomes)
	}
}

// TestBenchOverTLS runs the bench against an https:// target it trusts
// with --ca-file.
func TestBenchOverTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || r.URL.Path != "/v1/tools/call" || r.Header.Get("Authorization") != "Bearer tok" {
			answerJSON(w, http.StatusBadRequest, `{"error":{"code":"INVALID_REQUEST","message":"want TLS, the path and the token"}}`)
			return
		}
		answerJSON(w, http.StatusOK, `{"status":"completed"}`)
	}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	res := benchJSON(t, "--targets", srv.URL, "--ca-file", ca, "--token", "tok", "--calls", "20", "--clients", "2")
	if res.Calls != 20 || res.Outcomes["ran"] != 20 {
		t.Errorf("%d calls, outcomes %v; want 20 that ran", res.Calls, res.Outcomes)
	}
}

// TestBenchIdleClose runs the bench against a server that closes every
// connection after one answer without saying so (as a node closes an idle
// one): the next call on it finds the connection closed before any byte
// of its answer, and is made again on a new one, once.
func TestBenchIdleClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var served atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				served.Add(1)
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 22\r\n\r\n{\"status\":\"completed\"}")
			}()
		}
	}()
	res := benchJSON(t, "--targets", ln.Addr().String(), "--calls", "20", "--clients", "1", "--metrics=false")
	if res.Calls != 20 || res.Outcomes["ran"] != 20 || served.Load() != 20 {
		t.Errorf("%d calls (%d served), outcomes %v; want 20 that ran, each served once", res.Calls, served.Load(), res.Outcomes)
	}
}
