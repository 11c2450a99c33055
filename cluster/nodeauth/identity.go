package nodeauth

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Every Raft connection starts with a preamble naming the node protocol
// version the dialler speaks and the server id it means to reach:
// "carmy-raft/<version> <id>\n" ("carmy-raft/1 n2\n"; the id is empty when
// the dialler does not know it). The accepting node closes a connection
// of another version (logged through the refusal log, with both versions)
// or meant for another id. Addresses are not identities: a stale DNS answer, or IPs
// that containers swapped across restarts, can route the leader's
// AppendEntries for n2 to n3's process, which would then take n2's place
// in every quorum while n2 silently falls behind.
const (
	preambleMagic   = "carmy-raft/"
	preambleMax     = 512
	preambleTimeout = 10 * time.Second
)

// ErrWrongServer is the error of a Raft connection that reached a server
// other than the one it was meant for.
var ErrWrongServer = errors.New("cluster: raft connection meant for another server")

// IdentityStream adds the preamble to a stream layer (NewIdentityStream).
type IdentityStream struct {
	raft.StreamLayer
	self     string                                   // this node's server id
	refusals *Refusals                                // where a peer of another version is logged
	lookup   atomic.Pointer[func(addr string) string] // address → server id, once Raft runs
}

// NewIdentityStream adds the preamble to inner's connections, for the
// node whose server id is self; a peer of another protocol version is
// logged to refusals (nil: not logged). Until SetLookup, dialled
// connections name no server.
func NewIdentityStream(inner raft.StreamLayer, self string, refusals *Refusals) *IdentityStream {
	return &IdentityStream{StreamLayer: inner, self: self, refusals: refusals}
}

// SetLookup tells the stream how to name the server at an address.
func (s *IdentityStream) SetLookup(fn func(addr string) string) { s.lookup.Store(&fn) }

// Dial connects and sends the preamble naming the server configured at
// address.
func (s *IdentityStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := s.StreamLayer.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	id := ""
	if fn := s.lookup.Load(); fn != nil {
		id = (*fn)(string(address))
	}
	if timeout > 0 {
		_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	}
	if _, err := conn.Write([]byte(preambleMagic + versionString + " " + id + "\n")); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("cluster: raft preamble to %s: %w", address, err)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

// Accept returns the next connection; its first Read checks the preamble.
func (s *IdentityStream) Accept() (net.Conn, error) {
	conn, err := s.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return &checkedConn{Conn: conn, self: s.self, refusals: s.refusals}, nil
}

// checkedConn reads and checks the preamble before its first Read.
type checkedConn struct {
	net.Conn
	self     string
	refusals *Refusals
	once     sync.Once
	err      error
}

func (c *checkedConn) Read(p []byte) (int, error) {
	c.once.Do(func() { c.err = c.checkPreamble() })
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(p)
}

// checkPreamble reads the preamble a byte at a time (nothing of the Raft
// stream behind it) and closes the connection when it is malformed or
// names another server.
func (c *checkedConn) checkPreamble() error {
	_ = c.Conn.SetReadDeadline(time.Now().Add(preambleTimeout))
	var line []byte
	b := make([]byte, 1)
	for {
		if _, err := c.Conn.Read(b); err != nil {
			_ = c.Conn.Close()
			if err == io.EOF && len(line) == 0 {
				// Closed before a byte: a peer that hung up, or one
				// refused at the handshake (logged there). Raft drops
				// the connection quietly on a bare io.EOF.
				return io.EOF
			}
			return fmt.Errorf("cluster: raft preamble: %w", err)
		}
		if b[0] == '\n' {
			break
		}
		if line = append(line, b[0]); len(line) > preambleMax {
			_ = c.Conn.Close()
			return errors.New("cluster: raft preamble too long")
		}
	}
	_ = c.Conn.SetReadDeadline(time.Time{})
	rest, ok := strings.CutPrefix(string(line), preambleMagic)
	version, id, spaced := strings.Cut(rest, " ")
	if !ok || !spaced {
		_ = c.Conn.Close()
		return fmt.Errorf("cluster: raft connection from %s without the preamble", c.Conn.RemoteAddr())
	}
	if version != versionString {
		_ = c.Conn.Close()
		remote := c.Conn.RemoteAddr().String()
		c.refusals.Refused("raft connection of another node protocol version", remote, ProtocolMismatch(remote, version))
		// Logged: Raft drops the connection quietly on a bare io.EOF.
		return io.EOF
	}
	if id != "" && id != c.self {
		_ = c.Conn.Close()
		return fmt.Errorf("%w: %s reached %s (from %s)", ErrWrongServer, id, c.self, c.Conn.RemoteAddr())
	}
	return nil
}

// ServerAt names the server r's latest configuration lists at addr, ""
// when none. (GetConfiguration does not wait on Raft's main loop, so it
// may be called from the transport.)
func ServerAt(r *raft.Raft, addr string) string {
	f := r.GetConfiguration()
	if f.Error() != nil {
		return ""
	}
	for _, s := range f.Configuration().Servers {
		if string(s.Address) == addr {
			return string(s.ID)
		}
	}
	return ""
}
