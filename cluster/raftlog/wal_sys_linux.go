//go:build linux

package raftlog

import (
	"errors"
	"os"
	"syscall"
)

// fdatasync syncs f's data and what reading it back needs (its size),
// not its other metadata.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err == nil {
			return nil
		}
		if err != syscall.EINTR {
			return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
		}
	}
}

// Modes of fallocate(2).
const (
	fallocKeepSize  = 0x1
	fallocPunchHole = 0x2
)

// allocate reserves the blocks of f's bytes [off, off+n) without changing
// its size, so that writing them later needs no room. A file system that
// cannot (ENOTSUP) is not an error: nothing is reserved.
func allocate(f *os.File, off, n int64) error {
	return fallocate(f, fallocKeepSize, off, n)
}

// release gives back the blocks of f's bytes [off, off+n) (reserved past
// its end by allocate), best effort.
func release(f *os.File, off, n int64) {
	_ = fallocate(f, fallocKeepSize|fallocPunchHole, off, n)
}

func fallocate(f *os.File, mode uint32, off, n int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), mode, off, n)
		switch {
		case err == nil, errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.EOPNOTSUPP):
			return nil
		case err != syscall.EINTR:
			return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
		}
	}
}
