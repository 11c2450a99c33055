package iobuf_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/carmyhq/carmy/internal/iobuf"
)

// TestReadAppend checks that what a reader gives is appended whole after
// what dst held, whatever dst's capacity and however the reader splits
// it, that a read error is returned, and that a limit stops the reading.
func TestReadAppend(t *testing.T) {
	body := strings.Repeat("0123456789", 50)
	for _, capacity := range []int{0, 1, 10, len(body), len(body) + 1, 4 * len(body)} {
		for name, r := range map[string]func() io.Reader{
			"whole":         func() io.Reader { return strings.NewReader(body) },
			"byte by byte":  func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
			"data with EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
		} {
			dst := append(make([]byte, 0, 3+capacity), "ab:"...)
			got, err := iobuf.ReadAppend(dst, r(), 0)
			if err != nil || string(got) != "ab:"+body {
				t.Errorf("capacity %d, %s: read %q, %v", capacity, name, got, err)
			}
		}
	}
	if got, _ := iobuf.ReadAppend(make([]byte, 0, len(body)+1), strings.NewReader(body), 0); cap(got) != len(body)+1 {
		t.Errorf("a body that fits grew the buffer to %d bytes, want %d", cap(got), len(body)+1)
	}
	boom := errors.New("boom")
	if _, err := iobuf.ReadAppend(nil, iotest.ErrReader(boom), 0); !errors.Is(err, boom) {
		t.Errorf("a failing reader gave %v, want %v", err, boom)
	}
	got, err := iobuf.ReadAppend(nil, iotest.OneByteReader(strings.NewReader(body)), 100)
	if err != nil || !bytes.Equal(got, []byte(body[:100])) {
		t.Errorf("limit 100, one byte a read: read %d bytes, %v; want the first 100", len(got), err)
	}
}
