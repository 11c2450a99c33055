package nodeauth

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestRefusalLogIsRateLimited checks that refusals made as fast as a
// stranger can connect give one line per interval, which counts the rest.
func TestRefusalLogIsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	r := NewRefusals(slog.New(slog.NewTextHandler(&buf, nil)))
	for range 100 {
		r.Refused("raft connection without the cluster key", "127.0.0.1:1234", ErrRaftAuth)
	}
	if n := strings.Count(buf.String(), "refused a peer"); n != 1 {
		t.Fatalf("100 refusals logged %d lines, want 1:\n%s", n, buf.String())
	}
	// The next line, once the interval has passed, counts those skipped.
	r.mu.Lock()
	r.last = r.last.Add(-refusalLogEvery)
	r.mu.Unlock()
	r.Refused("raft connection without the cluster key", "127.0.0.1:1234", errors.New("again"))
	if !strings.Contains(buf.String(), "refusals_not_logged=99") {
		t.Fatalf("the second line does not count the 99 skipped:\n%s", buf.String())
	}
	var nilLog *Refusals
	nilLog.Refused("nothing", "", nil) // a nil log logs nothing, and does not panic
}
