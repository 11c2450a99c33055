package peer

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

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/internal/tlsmux"
	"github.com/carmyhq/carmy/store"
)

// The client's connection bounds. A call itself is bounded by its
// context: the caller chooses how long a join or a read index may take.
const (
	// DialTimeout bounds a TCP connect.
	DialTimeout = 2 * time.Second
	// TLSHandshakeTimeout bounds node TLS's handshake.
	TLSHandshakeTimeout = 5 * time.Second
	// IdleConnTimeout is how long a kept-alive connection waits unused.
	IdleConnTimeout = 90 * time.Second
	// keepAlive is the TCP keep-alive period of a connection.
	keepAlive = 30 * time.Second
)

// DialFunc dials like net.Dialer.DialContext.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// ClientConfig is how a node calls its peers.
type ClientConfig struct {
	// NodeID is this node's id, sent in NodeIDHeader.
	NodeID string
	// ClusterKey, when not empty, is sent in KeyHeader.
	ClusterKey string
	// TLS, when set, is node TLS: the client speaks mutual TLS under
	// tlsmux.NodeServerName and accepts only a server whose certificate
	// chains to the cluster CA with the node role.
	TLS *nodeauth.TLS
	// WrapDial, when set, wraps the client's dialer (a test fault layer);
	// node TLS runs over what it returns.
	WrapDial func(next DialFunc) DialFunc
}

// Client calls other nodes' peer endpoints over kept-alive connections,
// and opens forward streams (it is the forward.Dialer of a node). Every
// request carries the cluster key (when there is one), this node's id and
// its protocol version. It is safe for concurrent use.
type Client struct {
	key    string
	self   string
	scheme string // "https" with node TLS
	hc     *http.Client
	// dial and tlsConf (nil without node TLS) are how hc connects; the
	// forward streams (DialStream) connect the same way.
	dial    DialFunc
	tlsConf *tls.Config
}

// NewClient returns the client of a node with cfg.
func NewClient(cfg ClientConfig) *Client {
	dial := (&net.Dialer{Timeout: DialTimeout, KeepAlive: keepAlive}).DialContext
	if cfg.WrapDial != nil {
		dial = cfg.WrapDial(dial)
	}
	tr := &http.Transport{
		DialContext:         dial,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     IdleConnTimeout,
		TLSHandshakeTimeout: TLSHandshakeTimeout,
	}
	c := &Client{key: cfg.ClusterKey, self: cfg.NodeID, scheme: "http", hc: &http.Client{Transport: tr}, dial: dial}
	if cfg.TLS != nil {
		tc := cfg.TLS.ClientConfig()
		tc.ServerName = tlsmux.NodeServerName
		tc.NextProtos = []string{"http/1.1"}
		tr.TLSClientConfig = tc
		c.scheme = "https"
		c.tlsConf = tc
	}
	return c
}

// Close closes the client's idle connections. Streams it opened are
// their owner's to close.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// The calls. Each returns, on an error answer, the error it carries
// (Error.Err); an answer that carries none is store.ErrUnavailable,
// and a refusal of this node as a member (a wrong key, another protocol
// version: CheckAnswer) also matches ErrRefused. An error that
// matches ErrNotSent means the request never reached addr.

// ReadIndex asks the leader at addr for its read index (PathReadIndex).
func (c *Client) ReadIndex(ctx context.Context, addr string) (uint64, error) {
	var ans IndexAnswer
	_, err := c.post(ctx, addr, PathReadIndex, struct{}{}, &ans)
	return ans.Index, err
}

// Join asks the node at addr to add info to the cluster, or to update its
// addresses (PathJoin); it answers the members. The actor of ctx
// (store.ActorFrom) travels in ActorHeader.
func (c *Client) Join(ctx context.Context, addr string, info fsm.NodeInfo) ([]fsm.NodeInfo, error) {
	var ans JoinAnswer
	_, err := c.post(ctx, addr, PathJoin, info, &ans)
	return ans.Nodes, err
}

// Remove asks the node at addr to remove member id (PathRemove). The
// actor of ctx travels in ActorHeader.
func (c *Client) Remove(ctx context.Context, addr, id string) error {
	_, err := c.post(ctx, addr, PathRemove, RemoveRequest{ID: id}, &struct{}{})
	return err
}

// State reads the StateDigest of the node at addr (PathState).
func (c *Client) State(ctx context.Context, addr string) (StateDigest, error) {
	var d StateDigest
	_, err := c.do(ctx, http.MethodGet, addr, PathState, nil, &d)
	return d, err
}

// Silence tells the voter at addr that the leader is silent, and with
// check has it run Raft's check (PathSilence); it answers its log
// position.
func (c *Client) Silence(ctx context.Context, addr string, check bool) (LogPosition, error) {
	var pos LogPosition
	_, err := c.post(ctx, addr, PathSilence, SilenceRequest{Check: check}, &pos)
	return pos, err
}

// post sends body as JSON to addr's path and decodes a 200 answer into
// out. sent reports whether the request may have reached the other node.
func (c *Client) post(ctx context.Context, addr, path string, body, out any) (sent bool, err error) {
	b, err := json.Marshal(body)
	if err != nil {
		return false, err
	}
	return c.do(ctx, http.MethodPost, addr, path, b, out)
}

// do makes one request (with body, when not nil) and decodes a 200 answer
// into out.
func (c *Client) do(ctx context.Context, method, addr, path string, body []byte, out any) (sent bool, err error) {
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
		req.Header.Set(ActorHeader, a)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if !gotConn.Load() {
			return false, fmt.Errorf("%w: %w", ErrNotSent, err)
		}
		return true, err
	}
	defer resp.Body.Close()
	if err := CheckAnswer(addr, resp); err != nil {
		return true, err
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
	if err != nil {
		return true, err
	}
	if resp.StatusCode != http.StatusOK {
		return true, errorAnswer(addr, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return true, fmt.Errorf("peer: answer of %s%s: %w", addr, path, err)
	}
	return true, nil
}

// newRequest is a request to addr's path with what every peer call
// carries: the cluster key (when there is one), this node's id and its
// protocol version.
func (c *Client) newRequest(ctx context.Context, method, addr, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.scheme+"://"+addr+path, body)
	if err != nil {
		return nil, err
	}
	if c.key != "" {
		req.Header.Set(KeyHeader, c.key)
	}
	req.Header.Set(NodeIDHeader, c.self)
	req.Header.Set(ProtocolHeader, Protocol)
	return req, nil
}

// DialStream connects to addr as the client's calls do (the same dialer,
// mutual TLS with node TLS) and asks to upgrade the connection to a
// forward stream (PathStream, StreamProtocol); it returns the
// connection and a reader of what the leader sends on it. ctx bounds the
// handshake, and ending it ends the handshake at once. Errors:
// ErrRefused (with store.ErrUnavailable) when addr refuses this node
// as a member (a wrong key, another protocol version); otherwise
// ErrNotSent, with why: nothing of a stream that did not open was
// read.
func (c *Client) DialStream(ctx context.Context, addr string) (net.Conn, *bufio.Reader, error) {
	req, err := c.newRequest(ctx, http.MethodPost, addr, PathStream, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", StreamProtocol)
	conn, err := c.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNotSent, err)
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
			return nil, nil, fmt.Errorf("%w: %w", ErrNotSent, err)
		}
		conn = tc
	}
	if err := req.Write(conn); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the answer to the stream's upgrade: %w", ErrNotSent, err)
	}
	if err := CheckAnswer(addr, resp); err != nil {
		_ = resp.Body.Close()
		return nil, nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols && strings.EqualFold(resp.Header.Get("Upgrade"), StreamProtocol) {
		if !stop() {
			return nil, nil, fmt.Errorf("%w: %w", ErrNotSent, ctx.Err())
		}
		_ = conn.SetDeadline(time.Time{})
		ok = true
		return conn, br, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	err = errorAnswer(addr, resp.Status, raw)
	if errors.Is(err, ErrRefused) {
		return nil, nil, err
	}
	// Nothing was sent, whatever the answer says.
	return nil, nil, fmt.Errorf("%w: the stream's upgrade: %v", ErrNotSent, err)
}
