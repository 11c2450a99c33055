package nodeauth

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// plainStream is a Raft stream layer of plain TCP connections on a
// listener.
type plainStream struct{ net.Listener }

func (s plainStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

// identityPair returns a stream for a node with id self listening on
// loopback, and a dialling stream whose lookup names every address target.
func identityPair(t *testing.T, self, target string) (accepting, dialling *IdentityStream) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepting = &IdentityStream{StreamLayer: plainStream{ln}, self: self}
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	dialling = &IdentityStream{StreamLayer: plainStream{other}, self: "dialler"}
	if target != "-" {
		dialling.SetLookup(func(string) string { return target })
	}
	return accepting, dialling
}

// exchange dials accepting from dialling, writes payload and returns what
// the accepted side read (or its error).
func exchange(t *testing.T, accepting, dialling *IdentityStream, payload string) (string, error) {
	t.Helper()
	type result struct {
		got string
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := accepting.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		b := make([]byte, len(payload))
		_, err = io.ReadFull(c, b)
		done <- result{string(b), err}
	}()
	c, err := dialling.Dial(raft.ServerAddress(accepting.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(payload)); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		return r.got, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted")
	}
	return "", nil
}

func TestRaftConnectionsNameTheirServer(t *testing.T) {
	// Meant for this server: the Raft stream passes intact.
	a, d := identityPair(t, "n2", "n2")
	if got, err := exchange(t, a, d, "raft bytes\n\x00\x01"); err != nil || got != "raft bytes\n\x00\x01" {
		t.Fatalf("connection meant for n2 reaching n2: %q, %v", got, err)
	}
	// The dialler does not know whom it reaches yet (Raft not running).
	a, d = identityPair(t, "n2", "-")
	if got, err := exchange(t, a, d, "x"); err != nil || got != "x" {
		t.Fatalf("connection without a target id: %q, %v", got, err)
	}
	// Meant for n3 (its address is stale): refused.
	a, d = identityPair(t, "n2", "n3")
	if _, err := exchange(t, a, d, "append entries for n3"); !errors.Is(err, ErrWrongServer) {
		t.Fatalf("connection meant for n3 reaching n2: %v, want ErrWrongServer", err)
	}
}

func TestRaftConnectionWithoutPreambleIsRefused(t *testing.T) {
	a, _ := identityPair(t, "n2", "-")
	go func() {
		c, err := net.Dial("tcp", a.Addr().String())
		if err == nil {
			_, _ = c.Write([]byte("\x00\x01garbage without a preamble\n"))
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	c, err := a.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Read(make([]byte, 8)); err == nil {
		t.Fatal("a connection without the preamble was read")
	}
}

// TestRaftDialToSelfIsRefused: a configuration that lists this node's own
// address under another id (a peer's stale entry) must not let the node
// answer that peer's vote requests itself: the connection names the peer,
// and the node, accepting it, refuses it.
func TestRaftDialToSelfIsRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	self := &IdentityStream{StreamLayer: plainStream{ln}, self: "n3"}
	self.SetLookup(func(string) string { return "n2" }) // the stale entry: n2 at n3's address
	if _, err := exchange(t, self, self, "vote for n3?"); !errors.Is(err, ErrWrongServer) {
		t.Fatalf("a node dialling itself as n2: %v, want ErrWrongServer", err)
	}
}
