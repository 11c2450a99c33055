package raftlog

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"
)

// A full disk must not stop a node (docs/operations.md#a-full-disk), but Raft cannot go on
// without writing its term and vote: hashicorp/raft panics when its
// stable store refuses one. They share raft.db with the log, so a disk
// that fills up would fail them too. The node therefore keeps a little
// room back: a reserve file in the data dir, deleted the moment such a
// write fails for want of space, so that the write (a few pages) goes
// through, and made again once the log writes again (the disk has room).
// The log's own writes do not touch the reserve: a full disk stalls them,
// which makes the node refuse new calls (QueuedLog).

// ReserveFile and reserveBytes name and size the reserve: enough for
// hundreds of term and vote writes, little beside a data dir.
const (
	ReserveFile  = "disk-reserve"
	reserveBytes = 4 << 20
)

// Reserve is the reserve file of a data dir (NewReserve). Safe for
// concurrent use.
type Reserve struct {
	path string
	size int64
	log  *slog.Logger
	mu   sync.Mutex
}

// NewReserve returns the reserve of the data dir dir (its file not made
// yet: Ensure); its doings are logged to log.
func NewReserve(dir string, log *slog.Logger) *Reserve {
	return &Reserve{path: filepath.Join(dir, ReserveFile), size: reserveBytes, log: log}
}

// Ensure makes the reserve file whole, if it is not: size bytes written
// (not a sparse file, which would keep no room; the file system counts
// them against its free space once written, synced or not). When the disk
// has no room for it, it leaves no partial file and says so at DEBUG.
func (d *Reserve) Ensure() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st, err := os.Stat(d.path); err == nil && st.Size() == d.size {
		return
	}
	if err := d.write(); err != nil {
		os.Remove(d.path)
		d.log.Debug("the disk reserve could not be made", slog.String("path", d.path), slog.Any("err", err))
	}
}

func (d *Reserve) write() error {
	f, err := os.OpenFile(d.path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	zeros := make([]byte, 64<<10)
	for left := d.size; left > 0; left -= int64(len(zeros)) {
		if _, err := f.Write(zeros[:min(left, int64(len(zeros)))]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// release deletes the reserve file, and reports whether there was one to
// give back.
func (d *Reserve) release() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := os.Remove(d.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("the disk reserve could not be deleted", slog.String("path", d.path), slog.Any("err", err))
	}
	return err == nil
}

// ReservedStable is s, Raft's stable store (its term and vote), with a
// write that fails for want of space tried once more after r is given
// back.
func ReservedStable(s raft.StableStore, r *Reserve) raft.StableStore {
	return reservedStable{StableStore: s, reserve: r}
}

// reservedStable is ReservedStable's store.
type reservedStable struct {
	raft.StableStore
	reserve *Reserve
}

// Set implements raft.StableStore.
func (s reservedStable) Set(key, val []byte) error {
	return s.write(key, func() error { return s.StableStore.Set(key, val) })
}

// SetUint64 implements raft.StableStore.
func (s reservedStable) SetUint64(key []byte, val uint64) error {
	return s.write(key, func() error { return s.StableStore.SetUint64(key, val) })
}

func (s reservedStable) write(key []byte, set func() error) error {
	err := set()
	if DiskFull(err) && s.reserve.release() {
		s.reserve.log.Warn("the disk is full: gave back the disk reserve so that Raft could write its state",
			slog.String("key", string(key)), slog.String("reserve", s.reserve.path))
		err = set()
	}
	return err
}
