//go:build carmyfaults

package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/faultnet"
)

func TestFaultLayerNeedsTheEnvironment(t *testing.T) {
	for _, v := range []string{"", "0", "true", "yes"} {
		env := func(string) string { return v }
		if f := newFaults(env, discardLogger()); f != nil {
			t.Errorf("CARMY_TEST_FAULTS=%q turned the fault layer on", v)
		}
	}
	if f := newFaults(func(k string) string {
		if k == "CARMY_TEST_FAULTS" {
			return "1"
		}
		return ""
	}, discardLogger()); f == nil {
		t.Fatal("CARMY_TEST_FAULTS=1 did not turn the fault layer on")
	}
}

// A node with the fault layer serves its control and filters its API
// listener.
func TestFaultLayerServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("needs 127.0.0.2 on lo: %v", err)
	}
	ln.Close()
	clearCarmyEnv(t)
	t.Setenv("CARMY_TEST_FAULTS", "1")
	s := startServe(t, "--dev", "--http-addr", "127.0.0.1:0", "--cluster-key", testClusterKey)
	if !strings.Contains(s.logs.String(), "test fault layer active") {
		t.Fatalf("no warning logged:\n%s", s.logs)
	}
	if code, body := getFaults(t, s, testClusterKey); code != http.StatusOK || body != `{"drop_in":[],"drop_out":[]}`+"\n" {
		t.Fatalf("GET %s = %d %s, want 200 and no rules", faultsPath, code, body)
	}
	if code, _ := getFaults(t, s, "wrong"); code != http.StatusForbidden {
		t.Fatalf("GET %s with a wrong key = %d, want 403", faultsPath, code)
	}

	req, err := http.NewRequest(http.MethodPut, "http://"+s.addr+faultsPath, strings.NewReader(`{"drop_in":["127.0.0.2"]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(faultnet.KeyHeader, testClusterKey)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT %s = %d %s", faultsPath, resp.StatusCode, body)
	}

	// A caller from 127.0.0.2 is cut; one from 127.0.0.1 is not.
	from2 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext,
	}}
	req, err = http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+s.addr+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = from2.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("GET /healthz from 127.0.0.2 = %d, want the connection cut", resp.StatusCode)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("GET /healthz from 127.0.0.2 timed out (%v), want the connection cut", err)
	}
	if code, body := s.get(t, "/healthz", ""); code != http.StatusOK {
		t.Fatalf("GET /healthz from 127.0.0.1 = %d %s, want 200", code, body)
	}
}

func TestWithFaultControlRoutes(t *testing.T) {
	peer := &stubPeer{}
	f := faultnet.New()
	h := withFaultControl(peer, f, "k")

	req := httptest.NewRequest(http.MethodPut, faultsPath, strings.NewReader(`{"drop_out":["10.9.8.7"]}`))
	req.Header.Set(faultnet.KeyHeader, "k")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("PUT %s = %d %s, want 200", faultsPath, rec.Code, rec.Body)
	}
	if got := f.Rules().DropOut; !slices.Equal(got, []string{"10.9.8.7"}) {
		t.Fatalf("DropOut = %q after the PUT", got)
	}
	for _, path := range []string{"/internal/v1/apply", faultsPath + "/x", "/internal/v1/faultsx"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, nil))
		if rec.Code != http.StatusTeapot {
			t.Errorf("POST %s = %d, want the peer handler's answer", path, rec.Code)
		}
	}
	if want := []string{"/internal/v1/apply", faultsPath + "/x", "/internal/v1/faultsx"}; !slices.Equal(peer.paths, want) {
		t.Fatalf("the peer handler saw %q, want %q", peer.paths, want)
	}
}
