package api

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAllWhateverTheDeclaredSize checks that a body is read whole and
// alone whatever size it declares: right, unknown, too small, too large,
// in pieces, and that a read error is returned.
func TestReadAllWhateverTheDeclaredSize(t *testing.T) {
	body := strings.Repeat(`{"tool":"echo"}`, 40)
	for _, size := range []int64{int64(len(body)), -1, 0, 10, int64(len(body)) + 100, 1 << 20} {
		for name, r := range map[string]io.Reader{
			"whole":         strings.NewReader(body),
			"byte by byte":  iotest.OneByteReader(strings.NewReader(body)),
			"data with EOF": iotest.DataErrReader(strings.NewReader(body)),
		} {
			got, err := readAll(size, r)
			if err != nil || !bytes.Equal(got, []byte(body)) {
				t.Errorf("declared %d, %s: read %d bytes, %v; want the %d of the body", size, name, len(got), err, len(body))
			}
		}
	}
	boom := errors.New("boom")
	if _, err := readAll(5, iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Errorf("a failing reader gave %v, want %v", err, boom)
	}
	if got, err := readAll(int64(len(body)), strings.NewReader(body)); err != nil || cap(got) != len(body)+1 {
		t.Errorf("a body of its declared size took a buffer of %d bytes (%v), want %d", cap(got), err, len(body)+1)
	}
}
