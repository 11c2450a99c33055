package postgres

import (
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/carmyhq/carmy/store"
)

// DefaultTablePrefix begins the name of every table the store creates.
const DefaultTablePrefix = "carmy_"

// Config holds a Store's settings. The zero Config is valid: every field
// has a default.
type Config struct {
	// Capacity bounds the records the store holds (running, interrupted
	// and finished); a reservation of a new identity beyond it fails
	// closed with store.ErrCapacity. 0 means store.DefaultCapacity.
	//
	// The bound is checked by the process that reserves, against the count
	// every process shares: processes that share the tables should be
	// given the same Capacity. A lowered bound evicts nothing; new
	// identities are refused until the count drops below it.
	Capacity int
	// MaxBytes bounds the bytes the store holds (store.RecordSize summed
	// over its records, counted in the tables); 0 means none. Like
	// Capacity it is checked by the process that writes, against the count
	// every process shares. See store.Store.Reserve and Complete.
	MaxBytes int64
	// Schema is the PostgreSQL schema that holds the tables; it is created
	// when missing. "" means the current schema of the connection (the
	// first existing schema of its search_path), which is not created.
	Schema string
	// TablePrefix begins every table name; "" means DefaultTablePrefix.
	// Two stores in one schema with different prefixes are independent.
	TablePrefix string
	// Logger receives the store's few messages (schema migrations). nil
	// means slog.Default().
	Logger *slog.Logger
	// Rounds is how many rounds of writes (rounds.go) the store runs at
	// once, each with leases of its own (leases.go); 0 means 1. More
	// rounds in flight make smaller rounds (more commits) that wait less
	// for one another.
	Rounds int
	// NodeID names the process in the audit ledger (ledger.go) as the
	// actor of what it decides by itself (a completion, a release of a
	// reservation whose tool never started, executions marked
	// interrupted) when the context names no actor (store.WithActor). ""
	// means the record's node. A Fleet sets it to its node id.
	NodeID string
	// NoLedger keeps this store's decisions out of the audit ledger. For
	// a program that wants no ledger and measurements of its cost only:
	// the processes sharing a database should all keep it, or its chain
	// misses their decisions.
	NoLedger bool
	// LedgerChainEvery is how often the store chains, in the background,
	// the audit drafts its decisions queued (ledger_chain.go), when it
	// committed any since its last pass; 0 means
	// DefaultLedgerChainEvery, and a negative value no background pass
	// (every read of the ledger through a Store still chains first, and
	// so does another store's pass).
	LedgerChainEvery time.Duration
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Capacity == 0 {
		c.Capacity = store.DefaultCapacity
	}
	if c.TablePrefix == "" {
		c.TablePrefix = DefaultTablePrefix
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Rounds == 0 {
		c.Rounds = 1
	}
	if c.LedgerChainEvery == 0 {
		c.LedgerChainEvery = DefaultLedgerChainEvery
	}
	return c
}

// maxRounds bounds Config.Rounds.
const maxRounds = 16

// maxIdentifier is PostgreSQL's limit on an identifier, in bytes
// (NAMEDATALEN-1); longer names are silently truncated by the server.
const maxIdentifier = 63

// longestTable is the longest table name suffix the store uses.
const longestTable = "schema_version"

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Capacity < 0:
		return fmt.Errorf("postgres: negative capacity %d", c.Capacity)
	case c.MaxBytes < 0:
		return fmt.Errorf("postgres: negative max bytes %d", c.MaxBytes)
	case c.Rounds < 0 || c.Rounds > maxRounds:
		return fmt.Errorf("postgres: rounds %d, want 0 to %d", c.Rounds, maxRounds)
	case !validText(c.NodeID):
		return fmt.Errorf("postgres: node id %q must be valid UTF-8 without NUL", c.NodeID)
	case !validName(c.Schema):
		return fmt.Errorf("postgres: schema %q must be valid UTF-8 without NUL, at most %d bytes", c.Schema, maxIdentifier)
	case !validName(c.TablePrefix + longestTable):
		return fmt.Errorf("postgres: table prefix %q must be valid UTF-8 without NUL, at most %d bytes",
			c.TablePrefix, maxIdentifier-len(longestTable))
	}
	return nil
}

func validName(s string) bool {
	return len(s) <= maxIdentifier && validText(s)
}

// validText reports whether s can be stored in a PostgreSQL text column:
// valid UTF-8 without NUL.
func validText(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return false
		}
	}
	return utf8.ValidString(s)
}
