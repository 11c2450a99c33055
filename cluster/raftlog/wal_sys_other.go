//go:build !linux

package raftlog

import "os"

// fdatasync syncs f (fsync: no fdatasync here).
func fdatasync(f *os.File) error { return f.Sync() }

// allocate reserves nothing here: the margin is not kept.
func allocate(*os.File, int64, int64) error { return nil }

// release has nothing to give back here.
func release(*os.File, int64, int64) {}
