// Package logbuf buffers a process's log output, so that a busy node
// writes its log lines in a few large writes rather than one system call
// per line.
//
// A node logs a line for every call it answers and for every batch of
// commands a follower forwards to it, thousands a second under load; each
// was a write(2) of its own. Measured on the test machine (3 nodes, 64
// clients, new calls), the log at info cost about 9% of the calls/s that
// --log-level warn gave; most of it was those writes.
//
// What is buffered is written at most Delay after it was logged, at once
// when the buffer passes MaxBuffer, and by Flush and Close. A record at
// WARN or above is written out with everything before it as soon as it is
// logged (Handler). A process that crashes loses at most Delay's worth of
// lines below WARN; the Go runtime writes a panic's message to the file
// descriptor itself, unbuffered.
package logbuf

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Delay is the longest a line waits in the buffer, and MaxBuffer the size
// past which the buffer is written at once.
const (
	Delay     = 50 * time.Millisecond
	MaxBuffer = 64 << 10
)

// Writer is an io.Writer that buffers what is written to w. Safe for
// concurrent use.
type Writer struct {
	w io.Writer

	mu      sync.Mutex
	buf     []byte
	pending bool // a flush is scheduled
	closed  bool
	err     error // the first error w returned
}

// New returns a Writer over w.
func New(w io.Writer) *Writer { return &Writer{w: w} }

// Write buffers p. Once the Writer is closed it writes p through. It
// returns the error an earlier write to w failed with, if any, once.
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	switch {
	case len(b.buf) >= MaxBuffer:
		b.flushLocked()
	case !b.pending:
		b.pending = true
		time.AfterFunc(Delay, b.Flush)
	}
	err := b.err
	b.err = nil
	return len(p), err
}

// Flush writes what is buffered.
func (b *Writer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = false
	b.flushLocked()
}

// Close writes what is buffered; later writes go straight through.
func (b *Writer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	b.closed = true
	err := b.err
	b.err = nil
	return err
}

// flushLocked writes the buffer; b.mu is held.
func (b *Writer) flushLocked() {
	if len(b.buf) == 0 {
		return
	}
	if _, err := b.w.Write(b.buf); err != nil && b.err == nil {
		b.err = err
	}
	if cap(b.buf) > 4*MaxBuffer {
		b.buf = nil // keep no burst's buffer
	} else {
		b.buf = b.buf[:0]
	}
}

// Handler returns h writing through b, with every record at WARN or
// above written out (with what was buffered before it) as soon as it is
// logged.
func Handler(h slog.Handler, b *Writer) slog.Handler { return handler{h: h, b: b} }

type handler struct {
	h slog.Handler
	b *Writer
}

func (x handler) Enabled(ctx context.Context, l slog.Level) bool { return x.h.Enabled(ctx, l) }

func (x handler) Handle(ctx context.Context, r slog.Record) error {
	err := x.h.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		x.b.Flush()
	}
	return err
}

func (x handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h: x.h.WithAttrs(attrs), b: x.b}
}

func (x handler) WithGroup(name string) slog.Handler {
	return handler{h: x.h.WithGroup(name), b: x.b}
}
