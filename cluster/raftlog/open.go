package raftlog

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// The Raft log stores a node may keep its log in (--raft-log): the WAL
// (the default), or raft.db beside Raft's stable state, as every node did
// before the WAL.
const (
	LogWAL  = "wal"
	LogBolt = "bolt"
)

// OpenLog returns the Raft log store of the data dir dataDir of kind
// (LogWAL or LogBolt), and its path, for messages. bolt is the data dir's
// raft.db: Raft's stable store whatever the kind, and the log store of
// LogBolt.
//
// A data dir with a log in raft.db and none in WALDir (a node from before
// the WAL) has its log copied into the WAL on its first start with
// LogWAL (migrateBolt). A data dir whose log is in the WAL refuses
// LogBolt: raft.db's log would lack what the WAL took.
func OpenLog(dataDir, kind string, bolt *raftboltdb.BoltStore, log *slog.Logger) (raft.LogStore, string, error) {
	dir := filepath.Join(dataDir, WALDir)
	switch kind {
	case LogBolt:
		if _, err := os.Stat(dir); err == nil {
			return nil, "", fmt.Errorf("cluster: this data dir's raft log is in %s (written with --raft-log %s): start it with --raft-log %s", dir, LogWAL, LogWAL)
		}
		return bolt, filepath.Join(dataDir, "raft.db"), nil
	case LogWAL, "":
		if err := migrateBolt(dataDir, bolt, log); err != nil {
			return nil, "", err
		}
		w, err := OpenWAL(dir)
		if err != nil {
			return nil, "", err
		}
		return w, dir, nil
	default:
		return nil, "", fmt.Errorf("cluster: unknown raft log store %q: want %q or %q", kind, LogWAL, LogBolt)
	}
}

// migrateBatch is how many entries the migration copies per append.
const migrateBatch = 256

// migrateBolt makes the data dir's WAL, once: when WALDir does not exist,
// the log in raft.db (if any) is copied into a new WAL in WALDir.tmp,
// each append synced, and the directory is renamed WALDir, the data dir
// synced. The rename is the migration's commit: a crash before it leaves
// raft.db's log in use and the copy begun anew at the next start; after
// it the WAL is the log, and raft.db's copy of the entries is deleted (a
// crash before that leaves them there, unread). The stable store (term,
// vote) stays in raft.db. A copy that fails (a full disk) leaves the
// node unstarted, its raft.db as it was: it starts with --raft-log bolt.
func migrateBolt(dataDir string, bolt *raftboltdb.BoltStore, log *slog.Logger) error {
	dir := filepath.Join(dataDir, WALDir)
	if _, err := os.Stat(dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	first, err := bolt.FirstIndex()
	if err != nil {
		return fmt.Errorf("cluster: reading raft.db's log: %w", err)
	}
	last, err := bolt.LastIndex()
	if err != nil {
		return fmt.Errorf("cluster: reading raft.db's log: %w", err)
	}
	tmp := dir + ".tmp"
	if err := copyLog(tmp, bolt, first, last); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("cluster: copying raft.db's log (entries %d–%d) into %s failed; raft.db is as it was, and the node starts on it with --raft-log %s: %w",
			first, last, dir, LogBolt, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("cluster: raft log migration: %w", err)
	}
	if err := syncDir(dataDir); err != nil {
		return fmt.Errorf("cluster: raft log migration: %w", err)
	}
	if last == 0 {
		return nil
	}
	log.Info("moved the raft log from raft.db into the WAL", slog.String("wal", dir), slog.Uint64("first_index", first), slog.Uint64("last_index", last))
	if err := bolt.DeleteRange(first, last); err != nil {
		log.Warn("the raft log's old copy in raft.db could not be deleted (it is no longer read)", slog.Any("err", err))
	}
	return nil
}

// copyLog writes a new WAL in dir holding src's entries first–last.
func copyLog(dir string, src raft.LogStore, first, last uint64) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	w, err := OpenWAL(dir)
	if err != nil {
		return err
	}
	defer w.Close()
	if last == 0 {
		return nil
	}
	batch := make([]*raft.Log, 0, migrateBatch)
	for i := first; i <= last; i++ {
		l := new(raft.Log)
		if err := src.GetLog(i, l); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		batch = append(batch, l)
		if len(batch) == migrateBatch || i == last {
			if err := w.StoreLogs(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return nil
}
