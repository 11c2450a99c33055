package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/internal/faultnet"
)

// stubInternal stands for the node's internal handler.
type stubInternal struct{ paths []string }

func (s *stubInternal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.paths = append(s.paths, r.URL.Path)
	w.WriteHeader(http.StatusTeapot)
}

func TestWithFaultControlWithoutFaults(t *testing.T) {
	internal := &stubInternal{}
	if h := withFaultControl(internal, nil, "k"); h != http.Handler(internal) {
		t.Fatalf("without a fault layer the internal handler is wrapped (%T)", h)
	}
}

func TestWithFaultControlRoutes(t *testing.T) {
	internal := &stubInternal{}
	f := faultnet.New()
	h := withFaultControl(internal, f, "k")

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
			t.Errorf("POST %s = %d, want the internal handler's answer", path, rec.Code)
		}
	}
	if want := []string{"/internal/v1/apply", faultsPath + "/x", "/internal/v1/faultsx"}; !slices.Equal(internal.paths, want) {
		t.Fatalf("the internal handler saw %q, want %q", internal.paths, want)
	}
}

// getFaults sends GET /internal/v1/faults with the cluster key.
func getFaults(t *testing.T, s *runningServe, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+s.addr+faultsPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(faultnet.KeyHeader, key)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", faultsPath, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
