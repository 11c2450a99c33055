package cluster

import (
	"time"

	"go.etcd.io/bbolt"
)

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
