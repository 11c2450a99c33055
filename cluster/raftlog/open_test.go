package raftlog

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A data dir whose log is in raft.db (a node from before the WAL) keeps
// every entry, and its term, when it opens on the WAL; a copy left half
// done by a crash is begun anew; once the WAL holds the log, raft.db's
// copy is gone and the bolt log store is refused.
func TestOpenLogMigratesBoltLog(t *testing.T) {
	dataDir := t.TempDir()
	bolt, err := OpenBolt(filepath.Join(dataDir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { bolt.Close() }()
	// Entries 51–700 (a snapshot compacted the first 50), and a term.
	if err := bolt.StoreLogs(walEntries(51, 650, 2)); err != nil {
		t.Fatal(err)
	}
	if err := bolt.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatal(err)
	}
	// A crash during an earlier copy left a partial one.
	tmp := filepath.Join(dataDir, WALDir+".tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, segName(51)), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}

	store, path, err := OpenLog(dataDir, LogWAL, bolt, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dataDir, WALDir) {
		t.Fatalf("path %s", path)
	}
	w := store.(*WAL)
	checkWAL(t, w, 51, 700, term(2))
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the copy's temporary dir remains: %v", err)
	}
	if last, _ := bolt.LastIndex(); last != 0 {
		t.Fatalf("raft.db still holds entries up to %d", last)
	}
	if v, err := bolt.GetUint64([]byte("CurrentTerm")); err != nil || v != 2 {
		t.Fatalf("the term in raft.db: %d, %v; want 2", v, err)
	}
	if err := w.StoreLogs(walEntries(701, 1, 3)); err != nil {
		t.Fatal(err)
	}
	w.Close()

	// The next start opens the WAL as it is: no second copy.
	store, _, err = OpenLog(dataDir, LogWAL, bolt, quiet)
	if err != nil {
		t.Fatal(err)
	}
	w = store.(*WAL)
	checkWAL(t, w, 51, 701, func(i uint64) uint64 { return 2 + i/701 })
	w.Close()

	if _, _, err := OpenLog(dataDir, LogBolt, bolt, quiet); err == nil || !strings.Contains(err.Error(), "--raft-log wal") {
		t.Fatalf("the bolt log store on a data dir with a WAL: %v, want a refusal naming --raft-log wal", err)
	}
}

// A new data dir gets an empty WAL; the bolt log store is raft.db.
func TestOpenLogNewDataDir(t *testing.T) {
	for _, kind := range []string{LogWAL, LogBolt} {
		dataDir := t.TempDir()
		bolt, err := OpenBolt(filepath.Join(dataDir, "raft.db"))
		if err != nil {
			t.Fatal(err)
		}
		store, _, err := OpenLog(dataDir, kind, bolt, quiet)
		if err != nil {
			t.Fatal(err)
		}
		_, isWAL := store.(*WAL)
		_, walErr := os.Stat(filepath.Join(dataDir, WALDir))
		if isWAL != (kind == LogWAL) || (walErr == nil) != (kind == LogWAL) {
			t.Fatalf("%s: store %T, WAL dir %v", kind, store, walErr)
		}
		if w, ok := store.(*WAL); ok {
			w.Close()
		}
		bolt.Close()
	}
}
