package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"time"
)

// carmySystem calls POST /v1/tools/call of the echo tool on Carmy's nodes
// with Go's own HTTP client (kept-alive HTTP/1.1 connections, as many as
// callers), as an agent's runtime would.
type carmySystem struct {
	client     *http.Client
	urls       []string
	head, tail []byte // a call's body is head + request_id + tail
}

func newCarmy(o options, runID string) (*carmySystem, error) {
	tr := &http.Transport{
		Proxy:               nil, // straight to the nodes, whatever $HTTP_PROXY says
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: o.Clients,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	s := &carmySystem{client: &http.Client{Transport: tr}}
	for _, t := range o.Targets {
		s.urls = append(s.urls, "http://"+t+"/v1/tools/call")
	}
	s.head = []byte(`{"tool":"echo","arguments":{"payload":"` + randomText(o.ArgsSize) +
		`"},"session_id":"vsetcd-` + runID + `","request_id":"`)
	s.tail = []byte(`"}`)
	return s, nil
}

// post sends the call of request id key to target t and returns whether
// the answer was a replay.
func (s *carmySystem) post(ctx context.Context, t int, key string) (replayed bool, err error) {
	body := make([]byte, 0, len(s.head)+len(key)+len(s.tail))
	body = append(append(append(body, s.head...), key...), s.tail...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.urls[t], bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return false, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		if len(answer) > 300 {
			answer = answer[:300]
		}
		return false, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(answer))
	}
	return resp.Header.Get("Idempotent-Replayed") == "true", nil
}

// newCall is a call with a new request id: the node reserves it, runs
// echo, and records the result, two Raft commits.
func (s *carmySystem) newCall(ctx context.Context, t int, key string) error {
	replayed, err := s.post(ctx, t, key)
	if err == nil && replayed {
		err = fmt.Errorf("request id %s was answered as a replay", key)
	}
	return err
}

// replay repeats the call of key, which finished before.
func (s *carmySystem) replay(ctx context.Context, t int, key string) error {
	replayed, err := s.post(ctx, t, key)
	if err == nil && !replayed {
		err = fmt.Errorf("request id %s ran again instead of being replayed", key)
	}
	return err
}

func (s *carmySystem) close() { s.client.CloseIdleConnections() }

// randomText returns n random letters and digits: nothing JSON escapes.
func randomText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rand.N(len(alphabet))]
	}
	return string(b)
}
