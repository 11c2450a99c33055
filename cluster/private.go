package cluster

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// Modes of everything a node keeps on disk: the records, the Raft log and
// the snapshots hold tenants' arguments and results, and the data dir may
// hold the cluster key. Only the node's own user may read them.
const (
	privateDirMode  fs.FileMode = 0o700
	privateFileMode fs.FileMode = 0o600
)

// makePrivate creates dir (mode 0700) or, when it exists, tightens it and
// everything under it: a directory that others may read, write or enter
// becomes 0700, a file others may read or write becomes 0600 (the owner's
// execute bit aside). What it changed is logged once, as a warning, naming
// the old mode of the data dir — the way etcd treats a data dir looser
// than 0700, except that Carmy fixes it rather than only warning, since a
// node that starts must not serve from readable files.
//
// Symbolic links are neither followed nor changed. Errors name the path.
func makePrivate(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, privateDirMode); err != nil {
		return fmt.Errorf("cluster: data dir: %w", err)
	}
	root, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cluster: data dir: %w", err)
	}
	if !root.IsDir() {
		return fmt.Errorf("cluster: data dir %s is not a directory", dir)
	}
	fixed := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		changed, err := tighten(path, info)
		if changed {
			fixed++
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("cluster: making the data dir private: %w", err)
	}
	if fixed > 0 && log != nil {
		log.Warn("the data dir was readable by other users; made it private (directories 0700, files 0600)",
			slog.String("data_dir", dir), slog.String("was", root.Mode().Perm().String()), slog.Int("paths_fixed", fixed))
	}
	return nil
}

// tighten takes away group and other permissions from path (whose info is
// given) and reports whether it had any.
func tighten(path string, info fs.FileInfo) (bool, error) {
	perm := info.Mode().Perm()
	if perm&0o077 == 0 {
		return false, nil
	}
	want := perm &^ 0o077
	if info.IsDir() {
		want = privateDirMode
	}
	if err := os.Chmod(path, want); err != nil {
		return false, fmt.Errorf("chmod %s: %w", path, err)
	}
	return true, nil
}

// privateSnapshots is Raft's file snapshot store with every snapshot made
// private once written: hashicorp/raft creates snapshot directories 0755
// and files 0666 less the umask, which a library cannot change for its
// host process. The data dir above is 0700 already, so nothing is readable
// to others even in the moment between the write and the fix.
type privateSnapshots struct {
	*raft.FileSnapshotStore
	dir string // the store's root: <data-dir>/snapshots
	log *slog.Logger
}

// newPrivateSnapshots opens the snapshot store under dir/snapshots,
// keeping retain snapshots.
func newPrivateSnapshots(dataDir string, retain int, log *slog.Logger) (*privateSnapshots, error) {
	dir := filepath.Join(dataDir, "snapshots")
	fss, err := raft.NewFileSnapshotStoreWithLogger(dir, retain, newHCLog(log, "raft-snapshots"))
	if err != nil {
		return nil, err
	}
	s := &privateSnapshots{FileSnapshotStore: fss, dir: dir, log: log}
	if err := makePrivate(dir, nil); err != nil {
		return nil, err
	}
	return s, nil
}

// Create starts a snapshot whose files are made private when it closes.
func (s *privateSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &privateSink{SnapshotSink: sink, store: s}, nil
}

// privateSink closes a snapshot and then makes its directory private.
type privateSink struct {
	raft.SnapshotSink
	store *privateSnapshots
}

// Close finishes the snapshot (Raft then considers it durable) and makes
// it private. A failure to change modes is logged, not returned:
// the snapshot itself is good, and failing it would make Raft keep a
// longer log for no gain in privacy (the data dir is 0700).
func (p *privateSink) Close() error {
	if err := p.SnapshotSink.Close(); err != nil {
		return err
	}
	// Only this snapshot: the older ones were made private when they
	// closed. hashicorp/raft keeps them under <dir>/snapshots/<id>.
	if err := makePrivate(filepath.Join(p.store.dir, "snapshots", p.ID()), nil); err != nil && p.store.log != nil {
		p.store.log.Warn("a snapshot could not be made private", slog.String("snapshot", p.ID()), slog.Any("error", err))
	}
	return nil
}
