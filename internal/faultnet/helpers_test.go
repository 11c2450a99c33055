package faultnet

import (
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// The tests stand for separate hosts with distinct loopback addresses:
// Linux routes all of 127.0.0.0/8 to lo, so a socket may bind any of them.
const (
	ipA = "127.0.0.2"
	ipB = "127.0.0.3"
	ipC = "127.0.0.4"
	ipD = "127.0.0.5"
)

// wait bounds every wait of the tests; none sleeps.
const wait = 10 * time.Second

func needLoopbackRange(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux's 127.0.0.0/8 on lo")
	}
}

// listen listens on ip, port 0, until the test ends.
func listen(t *testing.T, ip string) net.Listener {
	t.Helper()
	needLoopbackRange(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dialerFrom is a dialer whose connections come from ip.
func dialerFrom(ip string) *net.Dialer {
	return &net.Dialer{Timeout: wait, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
}

// dialFrom connects from ip to addr, until the test ends.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	c, err := dialerFrom(ip).Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echo serves ln: every connection it accepts echoes what it reads.
func echo(t *testing.T, ln net.Listener) {
	t.Helper()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

// wantEcho checks that c carries traffic both ways to an echo server.
func wantEcho(t *testing.T, c net.Conn, what string) {
	t.Helper()
	if err := c.SetDeadline(time.Now().Add(wait)); err != nil {
		t.Fatal(err)
	}
	msg := []byte("ping")
	if _, err := c.Write(msg); err != nil {
		t.Fatalf("%s: write: %v", what, err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("%s: read: %v", what, err)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
}

// wantClosed checks that reading c ends (EOF, reset or closed) rather than
// times out: the connection was cut.
func wantClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case err == nil:
		t.Fatalf("%s: read data from a connection that should be cut", what)
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("%s: still open after %v", what, wait)
	}
}

// remoteIP is the IP of c's remote end.
func remoteIP(c net.Conn) string {
	ip, _ := addrIP(c.RemoteAddr())
	return ip.String()
}

// live returns how many connections f tracks.
func (f *Filter) live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, set := range f.conns {
		n += len(set)
	}
	return n
}
