package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/carmyhq/carmy/cluster"
)

// clusterKeyFile is the name, in the data dir, of the cluster key a node
// generates when it is given none (and no node TLS).
const clusterKeyFile = "cluster-key"

// readKeyFile reads a key from path (--cluster-key-file,
// --gossip-key-file): the file's text, surrounding whitespace trimmed.
func readKeyFile(flagName, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flagName, err)
	}
	k := strings.TrimSpace(string(b))
	if k == "" {
		return "", fmt.Errorf("--%s %s: the file is empty", flagName, path)
	}
	return k, nil
}

// resolveClusterKey returns the node's cluster key: --cluster-key, or
// the text of --cluster-key-file; with neither, and without node TLS, the
// key kept in <data-dir>/cluster-key, generated on first start. With node
// TLS and no key, it returns "" (the certificates authenticate the
// nodes). A key shorter than cluster.MinClusterKeyBytes, or guessable by
// checkClusterKey's simple estimate (under 128 bits), is refused.
func resolveClusterKey(cfg serveConfig, nodeTLS bool, log *slog.Logger) (string, error) {
	key := cfg.ClusterKey
	if cfg.ClusterKeyFile != "" {
		k, err := readKeyFile("cluster-key-file", cfg.ClusterKeyFile)
		if err != nil {
			return "", err
		}
		key = k
	}
	if key == "" && !nodeTLS {
		return generatedClusterKey(cfg.DataDir, log)
	}
	if key != "" && len(key) < cluster.MinClusterKeyBytes {
		return "", fmt.Errorf("refusing to start: the cluster key is %d bytes, want at least %d (carmy keygen makes one; "+
			"or give none, and the node generates one in its data dir)", len(key), cluster.MinClusterKeyBytes)
	}
	if key != "" {
		if err := checkClusterKey(key); err != nil {
			return "", fmt.Errorf("refusing to start: %w", err)
		}
	}
	return key, nil
}

// generatedClusterKey loads <dataDir>/cluster-key, or on first start
// writes a new one there: 32 random bytes, standard base64 (as carmy
// keygen prints), in a file of mode 0600 written whole (a temporary file
// renamed), in a data dir of mode 0700 when it has to make it. It logs
// where the key is and how other nodes join with it, never the key.
func generatedClusterKey(dataDir string, log *slog.Logger) (string, error) {
	path := filepath.Join(dataDir, clusterKeyFile)
	join := "other nodes of this cluster join with --cluster-key-file <a copy of this file>"
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		key := strings.TrimSpace(string(b))
		if len(key) < cluster.MinClusterKeyBytes {
			return "", fmt.Errorf("refusing to start: %s holds %d bytes, want at least %d: remove it to generate a new key", path, len(key), cluster.MinClusterKeyBytes)
		}
		if err := checkClusterKey(key); err != nil {
			return "", fmt.Errorf("refusing to start: %s: %w; remove it to generate a new key", path, err)
		}
		// A file left readable by others is made 0600, with a warning,
		// when the node makes its data dir private (cluster.Open).
		log.Info("using the cluster key kept in the data dir; "+join, slog.String("path", path))
		return key, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("the cluster key in the data dir: %w", err)
	}
	key, err := newKey(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generating a cluster key: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	if err := replaceFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing the generated cluster key: %w", err)
	}
	log.Info("generated a cluster key (no --cluster-key, --cluster-key-file or node TLS given); "+join, slog.String("path", path))
	return key, nil
}
