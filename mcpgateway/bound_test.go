package mcpgateway

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestUnitReader: SSE events and lines pass through unchanged however
// they are split in reads (LF or CRLF); past the bound, the complete
// units before the long one are read, then errAnswerTooLarge, with the
// long unit's head given to over.
func TestUnitReader(t *testing.T) {
	events := "event: message\r\ndata: {\"a\":1}\r\n\r\n: ping\n\nid: 7\ndata: x\ndata: y\n\n"
	lines := "{\"id\":1}\n{\"id\":2}\r\n"
	for _, c := range []struct {
		name, in string
		sse      bool
	}{{"sse", events, true}, {"lines", lines, false}} {
		for _, split := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader} {
			u := &unitReader{r: split(strings.NewReader(c.in)), max: 64, sse: c.sse, over: func([]byte) { t.Errorf("%s: over", c.name) }}
			out, err := io.ReadAll(u)
			if err != nil || string(out) != c.in {
				t.Errorf("%s: %q, %v; want %q", c.name, out, err, c.in)
			}
		}
	}
	long := strings.Repeat("x", 100)
	for _, c := range []struct {
		name, in, before string
		sse              bool
	}{
		{"sse", "data: ok\n\ndata: {\"id\":5," + long + "\n\ndata: late\n\n", "data: ok\n\n", true},
		{"lines", "{\"id\":1}\n{\"jsonrpc\":\"2.0\",\"id\":5," + long + "\n{\"id\":3}\n", "{\"id\":1}\n", false},
	} {
		var head []byte
		u := &unitReader{r: iotest.HalfReader(strings.NewReader(c.in)), max: 64, sse: c.sse, over: func(h []byte) { head = h }}
		out, err := io.ReadAll(u)
		if !errors.Is(err, errAnswerTooLarge) || string(out) != c.before {
			t.Errorf("%s: %q, %v; want %q and errAnswerTooLarge", c.name, out, err, c.before)
		}
		if !c.sse {
			if id, ok := headID(head); !ok || id != "5" {
				t.Errorf("%s: the id of the long line's head %q: %q %v", c.name, head, id, ok)
			}
		}
		if _, err := u.Read(make([]byte, 8)); !errors.Is(err, errAnswerTooLarge) {
			t.Errorf("%s: a read after: %v", c.name, err)
		}
	}
}
