package main_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api/client"
)

// apiClient returns a client (api/client) of the node at base, with token
// when set, that sends each request once through an HTTP client that
// waits up to a minute. The black-box tests make their ordinary API calls
// (a record read, a resolve, the cluster's status) through it, and keep
// raw HTTP where the HTTP itself is what they test: bodies, headers,
// status codes, envelopes, auth headers.
func apiClient(t testing.TB, base, token string) *client.Client {
	t.Helper()
	opts := []client.Option{client.WithRetry(client.NoRetry), client.WithHTTPClient(&http.Client{Timeout: time.Minute})}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	c, err := client.New(base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
