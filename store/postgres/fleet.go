package postgres

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy/store"
)

// A Fleet is one node of a fleet: processes that share one database and
// nothing else (no Raft, no gossip), each serving the same calls. It is a
// store.Store (the Store, opened in the background) and gives the runtime
// what a cluster gives it:
//
//   - liveness: the node writes a heartbeat row every Lease/4, stamped by
//     the server's clock. A node whose row is older than its own lease is
//     dead: every live node, every Lease/2, marks the running executions
//     of dead nodes interrupted (docs/operations.md#a-fleet-on-postgresql: within 30 s of a node's death
//     with the default lease of 10 s: 10 s of lease, 5 s between sweeps,
//     and the time one sweep takes). RunnerGone says what the last sweep
//     saw.
//   - readiness: Ready (and Reserve) refuse with store.ErrUnavailable
//     until the tables are open and while the node's own heartbeat is
//     failing or older than its lease, measured on this node from when
//     the last good beat was sent: a node never reserves once the others
//     may hold it dead. A node whose executions were marked interrupted
//     while it was cut off records their outcomes afterwards only as any
//     late runner does (Store.Complete: while the record is this
//     execution's and still running or interrupted).
//   - cancel delivery: Store.Cancel notifies a channel in its transaction;
//     the Fleet listens on a connection of its own and tells OnCancel's
//     function, wherever the cancel was asked. After that connection is
//     lost it catches up from the records (cancellations of this node's
//     executions since a minute before it was lost).
//   - one prober: the node holding a session advisory lock on its
//     listening connection runs the reconcile probes (ProbeOwner). When
//     that connection dies unseen, two nodes may both probe for the few
//     seconds until the holder's check finds it dead; a probe's
//     resolution commits only while the execution is still interrupted.
//   - retention: each node removes finished records past
//     FleetConfig.Retention (Store.Expire) every Retention/10, within
//     1 s to 1 min.
//   - the audit ledger: each node chains the entries its decisions
//     queued (its Store's background pass, ledger_chain.go), serves the
//     ledger from the database (AuditHead, AuditExport, which chain
//     first), prunes it past FleetConfig.AuditRetention and signs its
//     head with FleetConfig.AuditSigningKey (fleet_ledger.go).
//
// Run does all of it until its context ends. Every method is safe for
// concurrent use.
type Fleet struct {
	cfg         FleetConfig
	storeCfg    Config
	pool        *pgxpool.Pool
	incarnation string
	log         *slog.Logger
	started     time.Time

	st atomic.Pointer[Store]

	mu       sync.Mutex
	lastGood time.Time // when the last beat that succeeded was sent
	beatErr  error     // the last beat's error; nil after a good one
	peers    map[string]bool
	onCancel func(executionID string)

	prober atomic.Bool
}

// DefaultLease is how long a node's heartbeat holds (FleetConfig.Lease).
const DefaultLease = 10 * time.Second

// FleetConfig is one fleet node's settings.
type FleetConfig struct {
	// NodeID names this node; every process sharing the database needs
	// its own. Required.
	NodeID string
	// HTTPAddr is where this node's API is reached, shown to the others.
	HTTPAddr string
	// Version is this node's build, shown to the others.
	Version string
	// Lease is how long a heartbeat holds: silent longer, the node is
	// dead. 0 means DefaultLease; at least 1 s.
	Lease time.Duration
	// Retention is the age after which finished records are removed; 0
	// keeps them.
	Retention time.Duration
	// Logger receives the fleet's messages; nil means slog.Default().
	Logger *slog.Logger
	// AuditRetention is the age after which the audit ledger's entries
	// are pruned (fleet_ledger.go); 0 keeps them.
	AuditRetention time.Duration
	// AuditSigningKey, when set, is the Ed25519 key with which the nodes
	// sign a checkpoint of the ledger's head every AuditCheckpointEvery.
	AuditSigningKey ed25519.PrivateKey
	// AuditCheckpointEvery is how often a checkpoint is signed; 0 means
	// DefaultAuditCheckpointEvery.
	AuditCheckpointEvery time.Duration
}

var (
	_ store.Store              = (*Fleet)(nil)
	_ store.Expirer            = (*Fleet)(nil)
	_ store.InterruptedCounter = (*Fleet)(nil)
	_ store.RunningNodeLister  = (*Fleet)(nil)
)

// NewFleet returns a fleet node on a pool made from pc (which it owns and
// Close closes), with the Store's settings cfg. It does not connect: Run
// opens the tables (creating or migrating them, one process at a time)
// and keeps trying while the database cannot be reached; until then every
// operation fails with store.ErrUnavailable.
func NewFleet(pc *pgxpool.Config, cfg Config, fc FleetConfig) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if fc.Lease == 0 {
		fc.Lease = DefaultLease
	}
	switch {
	case fc.NodeID == "" || !validText(fc.NodeID):
		return nil, errors.New("postgres: fleet: a node id is required (valid UTF-8 without NUL)")
	case !validText(fc.HTTPAddr) || !validText(fc.Version):
		return nil, errors.New("postgres: fleet: the HTTP address and version must be valid UTF-8 without NUL")
	case fc.Lease < time.Second:
		return nil, fmt.Errorf("postgres: fleet: lease %s: at least 1s", fc.Lease)
	case fc.Retention < 0 || fc.AuditRetention < 0:
		return nil, fmt.Errorf("postgres: fleet: negative retention %s or audit retention %s", fc.Retention, fc.AuditRetention)
	case fc.AuditSigningKey != nil && len(fc.AuditSigningKey) != ed25519.PrivateKeySize:
		return nil, errors.New("postgres: fleet: AuditSigningKey is not an Ed25519 private key")
	}
	if fc.Logger == nil {
		fc.Logger = slog.Default()
	}
	if cfg.Logger == nil {
		cfg.Logger = fc.Logger
	}
	boundIdleTransactions(pc, fc.Lease)
	if cfg.NodeID == "" {
		cfg.NodeID = fc.NodeID
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: fleet: %w", err)
	}
	var inc [8]byte
	_, _ = rand.Read(inc[:])
	return &Fleet{
		cfg: fc, storeCfg: cfg, pool: pool, incarnation: hex.EncodeToString(inc[:]),
		log: fc.Logger, started: time.Now(), peers: map[string]bool{},
	}, nil
}

// Lease returns the node's lease.
func (f *Fleet) Lease() time.Duration { return f.cfg.Lease }

// Run opens the tables, then beats, sweeps, listens for cancellations and
// expires records until ctx ends. It returns nil then, or an error the
// fleet cannot get past by waiting: the tables are at a newer version
// than this build's, or the server refused the migration (a permission,
// say).
func (f *Fleet) Run(ctx context.Context) error {
	s, err := f.open(ctx)
	if err != nil || s == nil {
		return err
	}
	f.st.Store(s)
	f.beatOnce(ctx, true)
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){f.beatLoop, f.sweepLoop, f.listenLoop, f.ledgerLoop} {
		wg.Add(1)
		go func() { defer wg.Done(); loop(ctx) }()
	}
	wg.Wait()
	return nil
}

// openTimeout bounds one attempt to open the tables.
const openTimeout = 30 * time.Second

// open opens the Store, retrying while the database cannot be reached; a
// nil Store and error means ctx ended first.
func (f *Fleet) open(ctx context.Context) (*Store, error) {
	for attempt := 0; ; attempt++ {
		octx, cancel := context.WithTimeout(ctx, openTimeout)
		s, err := New(octx, f.pool, f.storeCfg)
		cancel()
		if err == nil {
			if attempt > 0 {
				f.log.Info("the database is reachable: tables open", slog.String("schema", s.Schema()))
			}
			return s, nil
		}
		if fatalOpen(err) {
			return nil, err
		}
		if attempt == 0 || attempt%10 == 0 {
			f.log.Warn("cannot reach the database yet; retrying", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(retryPause(attempt)):
		}
	}
}

// fatalOpen reports whether an error of New is one that waiting does not
// cure: tables newer than this build, or a statement the server refused
// with an ERROR (a permission, a bad schema name). A server that cannot
// be reached, or is starting or stopping (FATAL), is waited for.
func fatalOpen(err error) bool {
	if errors.Is(err, errSchemaNewer) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Severity == "ERROR"
}

// retryPause is the pause after a failed attempt: 250 ms doubling to 2 s.
func retryPause(attempt int) time.Duration {
	return min(250*time.Millisecond<<min(attempt, 4), 2*time.Second)
}

// Close closes the Store and the pool. Call it after Run has returned.
func (f *Fleet) Close() {
	if s := f.st.Load(); s != nil {
		s.Close()
	}
	f.pool.Close()
}

// errNotOpen answers every operation until Run has opened the tables.
var errNotOpen = fmt.Errorf("postgres: %w: the database has not been reached yet", store.ErrUnavailable)

// store returns the open Store, or errNotOpen.
func (f *Fleet) store() (*Store, error) {
	if s := f.st.Load(); s != nil {
		return s, nil
	}
	return nil, errNotOpen
}

// Ready returns nil when the node may take calls: the tables are open and
// its heartbeat is good and within its lease; otherwise an error matching
// store.ErrUnavailable that says why.
func (f *Fleet) Ready(context.Context) error {
	if _, err := f.store(); err != nil {
		return err
	}
	f.mu.Lock()
	last, beatErr := f.lastGood, f.beatErr
	f.mu.Unlock()
	switch {
	case beatErr != nil:
		return dbFailure(store.ErrUnavailable.Error()+": the database is unreachable (the heartbeat failed)", store.ErrUnavailable, beatErr)
	case last.IsZero() || time.Since(last) >= f.cfg.Lease:
		return fmt.Errorf("postgres: %w: this node's heartbeat lease has lapsed", store.ErrUnavailable)
	}
	return nil
}

// RunnerGone reports whether nodeID's runner is known to be gone: its
// heartbeat was past its lease at the last sweep. A node the sweep has
// not seen is not known to be gone.
func (f *Fleet) RunnerGone(nodeID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	alive, known := f.peers[nodeID]
	return known && !alive
}

// OnCancel installs the function told the execution id of every
// cancellation recorded in the database, by any node; it cancels the tool
// when it runs on this node and ignores the others.
func (f *Fleet) OnCancel(fn func(executionID string)) {
	f.mu.Lock()
	f.onCancel = fn
	f.mu.Unlock()
}

// ProbeOwner reports whether this node runs the fleet's reconcile probes
// now (it holds the prober lock).
func (f *Fleet) ProbeOwner() bool { return f.prober.Load() }
