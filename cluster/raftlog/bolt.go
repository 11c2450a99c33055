package raftlog

import (
	"errors"
	"fmt"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// OpenBolt opens the Raft log's BoltDB file at path. A file another
// process holds (its lock was not given up within boltOptions' Timeout)
// is an error that says so and what to do, rather than bbolt's "timeout".
func OpenBolt(path string) (*raftboltdb.BoltStore, error) {
	s, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: boltOptions()})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("cluster: %s is locked by another process: is another carmy serving this --data-dir? Stop it, or give this node another --data-dir (%w)", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: opening %s: %w", path, err)
	}
	return s, nil
}

// boltOptions tunes the BoltDB file of the Raft log for its write pattern:
// small transactions appending at the end, with ranges deleted from the
// front after snapshots.
//
//   - NoFreelistSync: the free list is not written on every commit (it is
//     rebuilt by a scan when the file is opened). A commit then writes the
//     log's pages and the meta page, not a free list that grows with every
//     truncation. Consul does the same.
//   - FreelistMapType: a hash map free list, whose cost does not grow with
//     fragmentation the way the array's does.
//   - Timeout: a second process on the same data dir fails at once with a
//     clear error instead of blocking on the file lock.
func boltOptions() *bbolt.Options {
	return &bbolt.Options{
		Timeout:        time.Second,
		NoFreelistSync: true,
		FreelistType:   bbolt.FreelistMapType,
	}
}
