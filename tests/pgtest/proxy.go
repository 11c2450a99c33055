package pgtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
)

// proxyPort names the proxy's socket file, beside nothing else in its own
// directory.
const proxyPort = 5433

// Proxy forwards connections from a Unix socket of its own to a Server,
// and can lose one reply on purpose: after DropReplyTo(pattern), the first
// message a client sends that contains pattern reaches the server, and the
// server's answer to it does not reach the client, whose connection is
// closed instead. The client then knows it sent a statement and not what
// became of it; the server did all of it.
type Proxy struct {
	dir    string
	target string
	ln     net.Listener

	armed atomic.Pointer[[]byte]
	// cut: every connection is closed at once and new ones are refused
	// (Cut, Restore).
	cut atomic.Bool
	// dropped counts the replies dropped.
	dropped atomic.Int64

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to s in a new temporary directory.
func NewProxy(s *Server) (*Proxy, error) {
	dir, err := os.MkdirTemp(tempBase(), "carmy-pgproxy-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(proxyPort)))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	p := &Proxy{
		dir: dir, ln: ln, conns: make(map[net.Conn]struct{}),
		target: filepath.Join(s.Dir, ".s.PGSQL."+strconv.Itoa(port)),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// DSN returns a connection string for database through the proxy.
func (p *Proxy) DSN(database string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", p.dir, proxyPort, User, database)
}

// URL returns the postgres:// URL of database through the proxy.
func (p *Proxy) URL(database string) string { return socketURL(p.dir, proxyPort, database) }

// DropReplyTo arms the proxy: the server's reply to the next client
// message containing pattern is dropped, and that connection closed.
func (p *Proxy) DropReplyTo(pattern []byte) {
	b := bytes.Clone(pattern)
	p.armed.Store(&b)
}

// Cut closes every connection through the proxy and closes new ones as
// soon as they are accepted, until Restore: the client is cut off from
// the server, which stays up.
func (p *Proxy) Cut() {
	p.cut.Store(true)
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

// Restore ends a Cut: new connections reach the server again.
func (p *Proxy) Restore() { p.cut.Store(false) }

// Dropped returns how many replies were dropped.
func (p *Proxy) Dropped() int64 { return p.dropped.Load() }

// Close stops the proxy, closes every connection and removes its directory.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	_ = os.RemoveAll(p.dir)
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.cut.Load() {
			_ = client.Close()
			continue
		}
		server, err := net.Dial("unix", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		var cut atomic.Bool
		p.wg.Add(2)
		go p.pipe(client, server, func(chunk []byte) {
			if pat := p.armed.Load(); pat != nil && bytes.Contains(chunk, *pat) && p.armed.CompareAndSwap(pat, nil) {
				cut.Store(true)
			}
		}, nil)
		go p.pipe(server, client, nil, func() bool {
			if cut.Load() {
				p.dropped.Add(1)
				return true
			}
			return false
		})
	}
}

// track registers a pair of connections so that Close closes them; false
// when the proxy is closing.
func (p *Proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_, _ = a.Close(), b.Close()
		return false
	}
	p.conns[a], p.conns[b] = struct{}{}, struct{}{}
	return true
}

// pipe copies from src to dst until either fails. seen is told each chunk
// before it is forwarded; drop, asked before a chunk is forwarded, ends
// the connection instead.
func (p *Proxy) pipe(src, dst net.Conn, seen func([]byte), drop func() bool) {
	defer p.wg.Done()
	defer func() {
		_, _ = src.Close(), dst.Close()
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if seen != nil {
				seen(buf[:n])
			}
			if drop != nil && drop() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
