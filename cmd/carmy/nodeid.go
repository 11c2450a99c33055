package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// A node started without --node-id (and without CARMY_NODE_ID) is not
// "node1" for ever: it gets an id of its own, generated on its first
// start and kept in its data dir, so that a second node started the same
// way never claims another's id.
const (
	// nodeIDFile is the name, in the data dir, of the file that keeps the
	// id of a node started without --node-id.
	nodeIDFile = "node-id"
	// legacyNodeID is the id earlier versions gave a node started without
	// --node-id, and legacyDataDir the data dir they gave it; a data dir
	// with Raft state but no node-id file is such a node's.
	legacyNodeID  = "node1"
	legacyDataDir = "carmy-data/" + legacyNodeID
	// flaglessDataDir is the default data dir of a node started without
	// --node-id (unless legacyDataDir exists).
	flaglessDataDir = "carmy-data/default"
)

// defaultDataDir is the data dir of a node given none: carmy-data/<id>,
// or without an id carmy-data/default, unless carmy-data/node1 exists (an
// earlier version's default: its data is found again).
func defaultDataDir(nodeID string) string {
	if nodeID != "" {
		return filepath.Join("carmy-data", nodeID)
	}
	if st, err := os.Stat(filepath.FromSlash(legacyDataDir)); err == nil && st.IsDir() {
		return filepath.FromSlash(legacyDataDir)
	}
	return filepath.FromSlash(flaglessDataDir)
}

// resolveNodeID returns the node's id: --node-id when given; else the id
// kept in <data-dir>/node-id; else node1 when the data dir holds Raft
// state (an earlier version's node, started without --node-id); else a new
// id, node-<8 hex digits>. keep writes an id not read from the file to
// <data-dir>/node-id (the data dir made, mode 0700, when missing) and logs
// it: serve calls it once the node's configuration has been accepted, so
// that a node refused at start leaves no data dir behind.
func resolveNodeID(cfg serveConfig, log *slog.Logger) (id string, keep func() error, err error) {
	none := func() error { return nil }
	if cfg.NodeID != "" {
		return cfg.NodeID, none, nil
	}
	path := filepath.Join(cfg.DataDir, nodeIDFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if err := checkNodeID(id); err != nil {
			return "", nil, fmt.Errorf("refusing to start: %s: %w; give --node-id, or remove the file to generate an id", path, err)
		}
		return id, none, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", nil, fmt.Errorf("the node id in the data dir: %w", err)
	}
	id, how := legacyNodeID, "the data dir holds cluster state from before node ids were kept: it is node1's, the id it was started with"
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "raft.db")); err != nil {
		if id, err = newNodeID(); err != nil {
			return "", nil, err
		}
		how = "generated a node id (no --node-id given); it is kept in the data dir and used on every start without --node-id"
	}
	return id, func() error {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		if err := replaceFile(path, []byte(id+"\n"), 0o600); err != nil {
			return fmt.Errorf("writing the node id: %w", err)
		}
		log.Info(how, slog.String("node_id", id), slog.String("path", path))
		return nil
	}, nil
}

// newNodeID returns node-<8 random hex digits>.
func newNodeID() (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a node id: %w", err)
	}
	return "node-" + hex.EncodeToString(b), nil
}

// checkNodeID reports an id that cannot name a node: empty, or with
// white space or a slash (it names the default data dir).
func checkNodeID(id string) error {
	if id == "" || strings.ContainsAny(id, " \t\r\n/") {
		return fmt.Errorf("node id %q: must be non-empty, without spaces or slashes", id)
	}
	return nil
}

// noPreviousExecutions reports whether no earlier process can have run
// executions under the id this node starts with, so that it takes calls
// at once (carmy.WithNoPreviousExecutions) rather than wait to mark them
// interrupted. Called before the node id is resolved, it holds when the
// data dir has no Raft state and either the id is to be generated (no
// --node-id, no id kept in the data dir: a new random id) or the node
// founds a new Raft cluster (--bootstrap, or --dev without --join): no
// cluster holds its records. A node that joins with a given id may be one
// whose data dir was lost, whose executions the cluster still holds.
func noPreviousExecutions(cfg serveConfig) bool {
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "raft.db")); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if cfg.NodeID == "" {
		_, err := os.Stat(filepath.Join(cfg.DataDir, nodeIDFile))
		if errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	return cfg.Bootstrap && !cfg.usesPostgres()
}
