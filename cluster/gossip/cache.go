package gossip

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/carmyhq/carmy/fsm"
)

// Cache keeps a copy of the replicated member table in the data
// dir (members.json). Raft applies no log entry at start until it hears
// from a leader, so a restarted node would not know its peers' HTTP and
// gossip addresses; the cache lets it find them (to rejoin gossip, or to
// ask to be re-added when its own address changed).
type Cache struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	members []fsm.NodeInfo
}

// NewCache reads the cache of the data dir dataDir (an unreadable one is
// logged to log and ignored).
func NewCache(dataDir string, log *slog.Logger) *Cache {
	c := &Cache{path: filepath.Join(dataDir, "members.json"), log: log}
	b, err := os.ReadFile(c.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		log.Warn("reading the members cache", slog.Any("err", err))
	default:
		if err := json.Unmarshal(b, &c.members); err != nil {
			log.Warn("the members cache is unreadable; ignoring it", slog.Any("err", err))
			c.members = nil
		}
	}
	return c
}

// Get returns the cached members.
func (c *Cache) Get() []fsm.NodeInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]fsm.NodeInfo(nil), c.members...)
}

// Put replaces the cache (atomically on disk).
func (c *Cache) Put(members []fsm.NodeInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members = members
	b, err := json.Marshal(members)
	if err != nil {
		return
	}
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		c.log.Warn("writing the members cache", slog.Any("err", err))
		return
	}
	if err := os.Rename(tmp, c.path); err != nil {
		c.log.Warn("writing the members cache", slog.Any("err", err))
	}
}
