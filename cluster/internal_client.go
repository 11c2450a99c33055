package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/internal/tlsmux"
	"github.com/carmyhq/carmy/store"
)

// internalClient calls other nodes' internal endpoints over kept-alive
// connections.
type internalClient struct {
	key    string
	self   string // this node's id, sent in nodeIDHeader
	scheme string // "https" with node TLS
	hc     *http.Client
	// dial and tlsConf (nil without node TLS) are how hc connects; the
	// forward streams (stream_client.go) connect the same way.
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	tlsConf *tls.Config
}

// newInternalClient returns the client of a node with cfg: it sends
// cfg.ClusterKey, dials through cfg.Hooks.Dial when that is set, and with t
// speaks mutual TLS under tlsmux.NodeServerName, accepting only a server
// whose certificate chains to the cluster CA.
func newInternalClient(cfg Config, t *nodeauth.TLS) *internalClient {
	dial := (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if cfg.Hooks.Dial != nil {
		dial = cfg.Hooks.Dial(dial)
	}
	tr := &http.Transport{
		DialContext:         dial,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second,
	}
	c := &internalClient{key: cfg.ClusterKey, self: cfg.NodeID, scheme: "http", hc: &http.Client{Transport: tr}, dial: dial}
	if t != nil {
		tc := t.ClientConfig()
		tc.ServerName = tlsmux.NodeServerName
		tc.NextProtos = []string{"http/1.1"}
		tr.TLSClientConfig = tc
		c.scheme = "https"
		c.tlsConf = tc
	}
	return c
}

func (c *internalClient) close() { c.hc.CloseIdleConnections() }

// post sends body to addr's path and decodes a 200 answer into out. An
// error answer becomes the error it carries (wireError.err); an answer
// that carries none is store.ErrUnavailable, and a refusal of this node as
// a member (a wrong key, another protocol version: checkAnswerProtocol)
// also matches errRefused. sent reports whether the request may
// have reached the other node.
func (c *internalClient) post(ctx context.Context, addr, path string, body, out any) (sent bool, err error) {
	b, err := json.Marshal(body)
	if err != nil {
		return false, err
	}
	return c.do(ctx, http.MethodPost, addr, path, b, out)
}

// get fetches addr's path and decodes a 200 answer into out, as post does.
func (c *internalClient) get(ctx context.Context, addr, path string, out any) error {
	_, err := c.do(ctx, http.MethodGet, addr, path, nil, out)
	return err
}

// do makes one request with the cluster key (and body, when not nil).
func (c *internalClient) do(ctx context.Context, method, addr, path string, body []byte, out any) (sent bool, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	// Until the client has a connection (dialled, and past its TLS
	// handshake), nothing of the request can have reached the other node.
	var gotConn atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
	})
	req, err := c.newRequest(ctx, method, addr, path, rd)
	if err != nil {
		return false, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if !gotConn.Load() {
			return false, fmt.Errorf("%w: %w", errNotSent, err)
		}
		return true, err
	}
	defer resp.Body.Close()
	if err := checkAnswerProtocol(addr, resp); err != nil {
		return true, err
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxInternalAnswer))
	if err != nil {
		return true, err
	}
	if resp.StatusCode != http.StatusOK {
		return true, errorAnswer(addr, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return true, fmt.Errorf("cluster: answer of %s%s: %w", addr, path, err)
	}
	return true, nil
}

// newRequest is a request to addr's path with what every internal call
// carries: the cluster key (when there is one), this node's id and its
// protocol version.
func (c *internalClient) newRequest(ctx context.Context, method, addr, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.scheme+"://"+addr+path, body)
	if err != nil {
		return nil, err
	}
	if c.key != "" {
		req.Header.Set(keyHeader, c.key)
	}
	req.Header.Set(nodeIDHeader, c.self)
	req.Header.Set(ProtocolHeader, protocolString)
	return req, nil
}

// errorAnswer is the error an error answer (status, body raw) of addr
// carries (wireError.err); one that carries none is store.ErrUnavailable,
// and a refusal of this node as a member also matches errRefused.
func errorAnswer(addr, status string, raw []byte) error {
	var we wireError
	if json.Unmarshal(raw, &we) != nil || !we.isError() {
		return fmt.Errorf("%w: %s answered %s", store.ErrUnavailable, addr, status)
	}
	if we.Code == store.CodeForbidden {
		return fmt.Errorf("%w: %s refused this node: %s (%w)", store.ErrUnavailable, addr, we.Message, errRefused)
	}
	return we.err()
}
