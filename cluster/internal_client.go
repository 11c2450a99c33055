package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/carmyhq/carmy/cluster/forward"
	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/cluster/wire"
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
	// forward streams (DialStream) connect the same way.
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
// error answer becomes the error it carries (wire.Error.err); an answer
// that carries none is store.ErrUnavailable, and a refusal of this node as
// a member (a wrong key, another protocol version: checkAnswerProtocol)
// also matches wire.ErrRefused. sent reports whether the request may
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
	if a := store.ActorFrom(ctx); a != "" {
		req.Header.Set(actorHeader, a)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if !gotConn.Load() {
			return false, fmt.Errorf("%w: %w", wire.ErrNotSent, err)
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
// carries (wire.Error.err); one that carries none is store.ErrUnavailable,
// and a refusal of this node as a member also matches wire.ErrRefused.
func errorAnswer(addr, status string, raw []byte) error {
	var we wire.Error
	if json.Unmarshal(raw, &we) != nil || !we.IsError() {
		return fmt.Errorf("%w: %s answered %s", store.ErrUnavailable, addr, status)
	}
	if we.Code == store.CodeForbidden {
		return fmt.Errorf("%w: %s refused this node: %s (%w)", store.ErrUnavailable, addr, we.Message, wire.ErrRefused)
	}
	return we.Err()
}

// DialStream connects to addr as hc would (the same dialer, mutual TLS
// with node TLS) and asks to upgrade the connection to a forward stream.
// Errors: wire.ErrRefused (with store.ErrUnavailable) when it refuses this node
// as a member (a wrong key, another protocol version); otherwise
// wire.ErrNotSent, with why.
func (c *internalClient) DialStream(ctx context.Context, addr string) (net.Conn, *bufio.Reader, error) {
	req, err := c.newRequest(ctx, http.MethodPost, addr, pathStream, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", wire.ErrNotSent, err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", forward.Protocol)
	conn, err := c.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", wire.ErrNotSent, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = conn.Close()
		}
	}()
	if d, has := ctx.Deadline(); has {
		_ = conn.SetDeadline(d)
	}
	// ctx ending (the forwarder closing) ends the handshake too.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if c.tlsConf != nil {
		tc := tls.Client(conn, c.tlsConf)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", wire.ErrNotSent, err)
		}
		conn = tc
	}
	if err := req.Write(conn); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", wire.ErrNotSent, err)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the answer to the stream's upgrade: %w", wire.ErrNotSent, err)
	}
	if err := checkAnswerProtocol(addr, resp); err != nil {
		_ = resp.Body.Close()
		return nil, nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols && strings.EqualFold(resp.Header.Get("Upgrade"), forward.Protocol) {
		if !stop() {
			return nil, nil, fmt.Errorf("%w: %w", wire.ErrNotSent, ctx.Err())
		}
		_ = conn.SetDeadline(time.Time{})
		ok = true
		return conn, br, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	err = errorAnswer(addr, resp.Status, raw)
	if errors.Is(err, wire.ErrRefused) {
		return nil, nil, err
	}
	// Nothing was sent, whatever the answer says.
	return nil, nil, fmt.Errorf("%w: the stream's upgrade: %v", wire.ErrNotSent, err)
}
