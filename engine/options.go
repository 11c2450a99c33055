package engine

import (
	"fmt"
	"log/slog"
	"time"
)

// Config holds the runtime's settings. App fills it with defaults; Options
// change it.
type Config struct {
	// NodeID names this node in records (node_id) and in interruption.
	NodeID string
	// NoPreviousExecutions says that no process before this one ran
	// executions under NodeID (an id generated on this start, or a node
	// founding a new cluster from an empty data dir): Start has nothing to
	// mark interrupted, so StartInBackground does not gate calls while the
	// store gets ready. Set it only when that is certain: a call this
	// process runs before Start marks the node's running executions
	// interrupted would be marked too.
	NoPreviousExecutions bool
	// MaxResultBytes bounds the JSON of one result's data; a larger result
	// is recorded as failed with RESULT_TOO_LARGE, never stored half.
	MaxResultBytes int
	// StoreTimeout bounds how long a call waits for one store write
	// (reserve or complete) before it answers UNAVAILABLE.
	StoreTimeout time.Duration
	// DrainTimeout is how long shutdown waits for running tools before it
	// cancels them.
	DrainTimeout time.Duration
	// MaxRunning bounds the tools running at once on this node; a call
	// that would start one more answers UNAVAILABLE before anything is
	// reserved (the tool does not run). 0 means no bound.
	MaxRunning int
	// MaxRunningPerPrincipal, when positive, is each principal's share of
	// the tools running at once on this node: a call of a non-admin
	// principal that already runs that many answers UNAVAILABLE (a
	// *BusyError naming the principal) before anything is reserved. The
	// admin's calls (Caller.Admin) count against MaxRunning only, and the
	// non-admin principals together never take the last MaxRunning/8
	// slots (at least 1, when MaxRunning >= 2), which stay free for the
	// admin. 0 (the default) means no share.
	MaxRunningPerPrincipal int
	// MaxInflightBytes bounds the bytes the calls running on this node
	// hold in flight: each call's arguments and metadata from its start,
	// and its result from the tool's return until its outcome is
	// recorded (on a follower, forwarded to the leader; on the leader,
	// proposed and replicated). A call whose arguments would take them
	// past it answers UNAVAILABLE (a *BusyError, resource
	// "inflight_bytes") before anything is reserved: the tool does not
	// run. A result is never refused: a tool that ran records its
	// outcome whatever the load. 0 means no bound; the default is
	// DefaultMaxInflightBytes(), sized from the memory the process may use.
	MaxInflightBytes int64
	Logger           *slog.Logger
	// Observer is told what the runtime does, for metrics (nil: nothing
	// is observed).
	Observer Observer
}

// Defaults of Config.
const (
	DefaultNodeID         = "node1"
	DefaultMaxResultBytes = 1 << 20
	DefaultStoreTimeout   = 10 * time.Second
	DefaultDrainTimeout   = 5 * time.Second
	DefaultMaxRunning     = 1024
)

func defaultConfig() Config {
	return Config{
		NodeID:           DefaultNodeID,
		MaxResultBytes:   DefaultMaxResultBytes,
		StoreTimeout:     DefaultStoreTimeout,
		DrainTimeout:     DefaultDrainTimeout,
		MaxRunning:       DefaultMaxRunning,
		MaxInflightBytes: DefaultMaxInflightBytes(),
		Logger:           slog.Default(),
	}
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.NodeID == "":
		return fmt.Errorf("config: empty node id")
	case c.MaxResultBytes <= 0:
		return fmt.Errorf("config: max result bytes must be positive")
	case c.StoreTimeout <= 0:
		return fmt.Errorf("config: store timeout must be positive")
	case c.DrainTimeout < 0:
		return fmt.Errorf("config: negative drain timeout")
	case c.MaxRunning < 0:
		return fmt.Errorf("config: negative max running")
	case c.MaxRunningPerPrincipal < 0:
		return fmt.Errorf("config: negative max running per principal")
	case c.MaxInflightBytes < 0:
		return fmt.Errorf("config: negative max in-flight bytes")
	case c.Logger == nil:
		return fmt.Errorf("config: no logger")
	}
	return nil
}

// Option changes the runtime's Config.
type Option func(*Config)

// WithNodeID sets the node id.
func WithNodeID(id string) Option { return func(c *Config) { c.NodeID = id } }

// WithNoPreviousExecutions declares that no earlier process ran
// executions under this node's id (Config.NoPreviousExecutions).
func WithNoPreviousExecutions() Option { return func(c *Config) { c.NoPreviousExecutions = true } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(c *Config) { c.Logger = l } }

// WithMaxResultBytes sets the bound on one result's data.
func WithMaxResultBytes(n int) Option { return func(c *Config) { c.MaxResultBytes = n } }

// WithStoreTimeout sets the bound on one store write.
func WithStoreTimeout(d time.Duration) Option { return func(c *Config) { c.StoreTimeout = d } }

// WithDrainTimeout sets how long shutdown waits for running tools.
func WithDrainTimeout(d time.Duration) Option { return func(c *Config) { c.DrainTimeout = d } }

// WithMaxRunning bounds the tools running at once on this node (0: no
// bound).
func WithMaxRunning(n int) Option { return func(c *Config) { c.MaxRunning = n } }

// WithMaxRunningPerPrincipal sets each non-admin principal's share of the
// tools running at once on this node (0: no share); see
// Config.MaxRunningPerPrincipal.
func WithMaxRunningPerPrincipal(n int) Option {
	return func(c *Config) { c.MaxRunningPerPrincipal = n }
}

// WithMaxInflightBytes bounds the bytes the calls running on this node
// hold in flight (0: no bound); see Config.MaxInflightBytes.
func WithMaxInflightBytes(n int64) Option { return func(c *Config) { c.MaxInflightBytes = n } }

// WithObserver adds o to the observers the runtime tells what it does;
// several are told in the order they were added.
func WithObserver(o Observer) Option {
	return func(c *Config) {
		switch {
		case o == nil:
		case c.Observer == nil:
			c.Observer = o
		default:
			c.Observer = observers{c.Observer, o}
		}
	}
}
