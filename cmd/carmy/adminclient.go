package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/internal/certs"
)

// newAdminClient returns the API client of `carmy cluster`: the node at
// base, the admin token, the --ca-file's roots, one attempt per request
// (an operator sees each answer and decides).
func newAdminClient(opts clusterOptions, base string) (*client.Client, error) {
	tc, err := certs.ClientConfig(opts.CAFile)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{}
	if tc != nil {
		hc.Transport = &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tc}
	}
	return client.New(base, client.WithToken(opts.Token), client.WithHTTPClient(hc),
		client.WithRetry(client.NoRetry), client.WithUserAgent("carmy/"+version))
}

// adminRequest is one request of `carmy cluster`, for its error messages.
type adminRequest struct {
	addr    string // the node as the operator gave it
	url     string // the request's URL
	method  string
	timeout time.Duration
	token   bool // an admin token was given
}

// apiError is an error answer of the API (docs/errors.md), printed as
// "CODE: message", with a hint when no admin token was given.
type apiError struct {
	*client.APIError
	hint string
}

func (e *apiError) Error() string {
	msg := e.Code + ": " + e.Message
	if e.hint != "" {
		msg += " (" + e.hint + ")"
	}
	return msg
}

func (e *apiError) Unwrap() error { return e.APIError }

// send makes the request within the timeout and returns the status and
// the answer as it came (also for an error answer, for --json). Its
// errors say what an operator can do: an *apiError, an answer that is not
// the API's, no answer within --timeout, or a node out of reach.
func (r adminRequest) send(ctx context.Context, do func(context.Context) (*client.ClusterStatus, error)) (*client.ClusterStatus, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	st, err := do(ctx)
	if err == nil {
		return st, st.Raw, nil
	}
	var ae *client.APIError
	var pe *client.ProtocolError
	switch {
	case errors.As(err, &ae):
		e := &apiError{APIError: ae}
		if !r.token && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden) {
			e.hint = "no admin token was given: set --token or $" + envAdminToken
		}
		return nil, ae.Body, e
	case errors.As(err, &pe) && pe.Status/100 == 2:
		return nil, pe.Body, fmt.Errorf("%s %s answered something that is not a cluster status: %v", r.method, r.url, pe.Err)
	case errors.As(err, &pe):
		text := strings.TrimSpace(pe.Snippet)
		if len(pe.Body) > len(pe.Snippet) {
			text += "…"
		}
		return nil, pe.Body, fmt.Errorf("%s %s: %d %s: %s", r.method, r.url, pe.Status, http.StatusText(pe.Status), text)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, nil, fmt.Errorf("no answer from the node at %s within %s (--timeout)", r.addr, r.timeout)
	case ctx.Err() != nil:
		return nil, nil, fmt.Errorf("%s %s: %w", r.method, r.url, ctx.Err())
	}
	return nil, nil, fmt.Errorf("could not reach the node at %s (is it running? set --addr or $%s): %w", r.addr, envClusterAddr, err)
}
