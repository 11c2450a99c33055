package client_test

import (
	"net"
	"testing"

	"github.com/carmyhq/carmy/api/client"
)

// Live is nil for a node that serves and an error, after one attempt, for
// an address nobody listens on.
func TestLive(t *testing.T) {
	c, _ := newClient(t, startNode(t))
	if err := c.Live(t.Context()); err != nil {
		t.Fatalf("Live of a serving node: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	c, cnt := newClient(t, closed, client.WithRetry(fastRetry))
	if err := c.Live(t.Context()); err == nil {
		t.Fatal("Live of a closed port: nil")
	}
	if n := cnt.n.Load(); n != 1 {
		t.Errorf("%d attempts, want 1: Live is not retried", n)
	}
}
