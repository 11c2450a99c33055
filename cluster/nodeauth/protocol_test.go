package nodeauth

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A Raft connection whose preamble names another protocol version is
// closed before a Raft byte is read, and the refusal is logged with both
// versions; one of this version passes.
func TestRaftConnectionOfAnotherProtocolIsRefused(t *testing.T) {
	a, _ := identityPair(t, "n2", "-")
	var logs syncBuffer
	a.refusals = NewRefusals(slog.New(slog.NewTextHandler(&logs, nil)))
	go func() {
		c, err := net.Dial("tcp", a.Addr().String())
		if err == nil {
			_, _ = c.Write([]byte(preambleMagic + "3 n2\nraft bytes"))
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	c, err := a.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := c.Read(make([]byte, 8)); err == nil || n > 0 {
		t.Fatalf("a connection of version 3 was read: %d bytes, %v", n, err)
	}
	if !strings.Contains(logs.String(), "raft connection of another node protocol version") ||
		!strings.Contains(logs.String(), "speaks node protocol 3, this node 2") {
		t.Errorf("the refusal is not logged with both versions:\n%s", logs.String())
	}
	if got, err := exchange(t, a, func() *IdentityStream { _, d := identityPair(t, "x", "n2"); return d }(), "x"); err != nil || got != "x" {
		t.Errorf("a connection of this version: %q, %v", got, err)
	}
}
