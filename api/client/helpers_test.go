package client_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/tests/testutil"
)

// counter is an http.RoundTripper that counts the requests it sends.
type counter struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// newClient returns a client of base whose requests a counter counts.
func newClient(t *testing.T, base string, opts ...client.Option) (*client.Client, *counter) {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	cnt := &counter{base: tr}
	c, err := client.New(base, append([]client.Option{client.WithHTTPClient(&http.Client{Transport: cnt})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, cnt
}

// fastRetry retries quickly, for tests.
var fastRetry = client.RetryPolicy{MaxAttempts: 6, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}

// newNode returns a runtime with the demo tools and a quiet logger; setup,
// when set, runs before it serves.
func newNode(t *testing.T, opts ...carmy.Option) *carmy.Runtime {
	t.Helper()
	app := carmy.App(append([]carmy.Option{
		carmy.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		carmy.WithDrainTimeout(100 * time.Millisecond),
	}, opts...)...)
	if err := app.AddDemoTools(); err != nil {
		t.Fatal(err)
	}
	return app
}

// startNode serves a node with the demo tools and no auth.
func startNode(t *testing.T) string {
	t.Helper()
	return "http://" + testutil.Serve(t, newNode(t), api.Config{})
}

// asAPIError returns err's *APIError or fails the test.
func asAPIError(t *testing.T, err error) *client.APIError {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) carries no *client.APIError", err, err)
	}
	return ae
}

// asRequestError returns err's *RequestError or fails the test.
func asRequestError(t *testing.T, err error) *client.RequestError {
	t.Helper()
	var re *client.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *client.RequestError", err, err)
	}
	return re
}

// fake is an httptest handler that answers with the functions in answers,
// one per request (the last one repeats), and records what it received.
type fake struct {
	mu       sync.Mutex
	answers  []func(w http.ResponseWriter, r *http.Request)
	bodies   []map[string]any
	requests []*http.Request
	times    []time.Time
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	i := len(f.requests)
	f.requests = append(f.requests, r)
	f.bodies = append(f.bodies, body)
	f.times = append(f.times, time.Now())
	answer := f.answers[min(i, len(f.answers)-1)]
	f.mu.Unlock()
	answer(w, r)
}

func (f *fake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// envelope answers the error envelope of docs/errors.md.
func envelope(status int, code string, extra map[string]any, headers ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		obj := map[string]any{"code": code, "message": "fake " + code}
		for k, v := range extra {
			obj[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": obj})
	}
}

// completed answers a completed call, echoing the request's request_id.
func completed(data string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"execution_id":"exec_fake","request_id":"x","session_id":"","tool":"echo",`+
			`"status":"completed","data":`+data+`,"replayed":false,`+
			`"started_at":"2026-11-30T10:00:00.123Z","finished_at":"2026-11-30T10:00:00.140Z"}`)
	}
}
