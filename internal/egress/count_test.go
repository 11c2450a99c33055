package egress

import (
	"errors"
	"net"
	"testing"
)

// hookConn is a connection whose Write runs a hook in the middle, as if
// the peer answered before the write returned, and writes short when told.
type hookConn struct {
	net.Conn
	during func()
	short  int // bytes written when > 0, with an error
}

func (c *hookConn) Write(p []byte) (int, error) {
	if c.during != nil {
		c.during()
	}
	if c.short > 0 {
		return c.short, errors.New("short write")
	}
	return len(p), nil
}

// TestAnswerDuringWriteIsNotUnanswered: an answer noted while the write
// that carried the request has not yet returned covers that write, so a
// rewind after it (a redirect) is not taken for a re-send.
func TestAnswerDuringWriteIsNotUnanswered(t *testing.T) {
	s := &Send{}
	hc := &hookConn{}
	cc := &countingConn{Conn: hc}
	s.got(cc)
	hc.during = s.answer
	if _, err := cc.Write([]byte("POST / HTTP/1.1\r\n\r\n{}")); err != nil {
		t.Fatal(err)
	}
	if s.unanswered() {
		t.Fatal("unanswered after an answer that arrived during the write")
	}
	if !s.Sent() {
		t.Fatal("Sent is false after a write")
	}
}

// TestShortWriteCountsWhatWasWritten: a write that fails part-way counts
// the bytes it wrote, and one that wrote nothing leaves the request unsent.
func TestShortWriteCountsWhatWasWritten(t *testing.T) {
	for _, tc := range []struct {
		short int
		want  int64
	}{{3, 3}, {0, 0}} {
		hc := &hookConn{short: tc.short}
		if tc.short == 0 {
			hc.short = -1 // fail with nothing written
		}
		cc := &countingConn{Conn: &failConn{hookConn: hc}}
		s := &Send{}
		s.got(cc)
		cc.Write([]byte("0123456789"))
		if got := cc.written.Load(); got != tc.want {
			t.Errorf("short %d: counted %d bytes, want %d", tc.short, got, tc.want)
		}
		if s.Sent() != (tc.want > 0) {
			t.Errorf("short %d: Sent() = %v", tc.short, s.Sent())
		}
	}
}

// failConn turns a negative short into a write of nothing that fails.
type failConn struct{ *hookConn }

func (c *failConn) Write(p []byte) (int, error) {
	if c.short < 0 {
		return 0, errors.New("refused")
	}
	return c.hookConn.Write(p)
}
