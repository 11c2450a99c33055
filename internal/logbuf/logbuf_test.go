package logbuf

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuf is a bytes.Buffer safe for the flush timer's goroutine, counting
// the writes it takes.
type syncBuf struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
	err    error
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	if s.err != nil {
		return 0, s.err
	}
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuf) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// Lines below WARN are written together, within Delay, in one write.
func TestLinesAreWrittenTogetherWithinDelay(t *testing.T) {
	var out syncBuf
	w := New(&out)
	log := slog.New(Handler(slog.NewTextHandler(w, nil), w))
	start := time.Now()
	for i := range 100 {
		log.Info("call", "n", i)
	}
	if got := out.Writes(); got != 0 && time.Since(start) < Delay {
		t.Fatalf("%d writes right after logging, want them buffered", got)
	}
	deadline := time.Now().Add(10 * Delay)
	for strings.Count(out.String(), "msg=call") < 100 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 100 lines written %s after logging (Delay %s)", strings.Count(out.String(), "msg=call"), 10*Delay, Delay)
		}
		time.Sleep(Delay / 10)
	}
	// One write, or a few if logging took longer than Delay: not one a line.
	if got, most := out.Writes(), 1+int(time.Since(start)/Delay); got > most {
		t.Errorf("%d writes for 100 lines, want at most %d", got, most)
	}
}

// A WARN record is written, with everything logged before it and in
// order, by the time the call that logs it returns.
func TestWarnIsWrittenAtOnce(t *testing.T) {
	var out syncBuf
	w := New(&out)
	log := slog.New(Handler(slog.NewTextHandler(w, nil), w).WithAttrs([]slog.Attr{slog.String("node", "n1")}))
	log.Info("first")
	log.Warn("second")
	got := out.String()
	i, j := strings.Index(got, "msg=first"), strings.Index(got, "msg=second")
	if i < 0 || j < 0 || i > j {
		t.Fatalf("after a WARN the output is %q, want the INFO line then the WARN", got)
	}
	if !strings.Contains(got, "node=n1") {
		t.Errorf("attributes of WithAttrs lost: %q", got)
	}
}

// A full buffer is written at once; Close writes the rest and lets later
// writes through.
func TestFullBufferAndClose(t *testing.T) {
	var out syncBuf
	w := New(&out)
	line := bytes.Repeat([]byte("x"), 1024)
	for range MaxBuffer / len(line) {
		w.Write(line)
	}
	if out.Writes() != 1 || len(out.String()) != MaxBuffer {
		t.Fatalf("after %d bytes: %d writes of %d bytes, want one of them all", MaxBuffer, out.Writes(), len(out.String()))
	}
	w.Write([]byte("tail\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "tail\n") {
		t.Fatal("Close did not write what was buffered")
	}
	before := out.Writes()
	w.Write([]byte("after\n"))
	if out.Writes() != before+1 || !strings.HasSuffix(out.String(), "after\n") {
		t.Fatal("a write after Close was not written through")
	}
}

// An error of the underlying writer is returned once, by a later call.
func TestWriteErrorIsReported(t *testing.T) {
	out := &syncBuf{err: errors.New("disk gone")}
	w := New(out)
	w.Write([]byte("a\n"))
	w.Flush()
	if _, err := w.Write([]byte("b\n")); err == nil {
		t.Fatal("the failed flush was not reported")
	}
	if _, err := w.Write([]byte("c\n")); err != nil {
		t.Fatalf("the same failure reported twice: %v", err)
	}
}

// Many goroutines logging at once lose no line (run with -race).
func TestConcurrentLogging(t *testing.T) {
	var out syncBuf
	w := New(&out)
	log := slog.New(Handler(slog.NewJSONHandler(w, nil), w))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				if i%100 == 0 {
					log.Warn("w", "g", g)
				} else {
					log.Info("i", "g", g, "n", i)
				}
			}
		}()
	}
	wg.Wait()
	w.Close()
	if got := strings.Count(out.String(), "\n"); got != 8*500 {
		t.Fatalf("%d lines, want %d", got, 8*500)
	}
}
