package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carmyhq/carmy/store"
)

// Runtime is Carmy's tool runtime: the registry of tools, the executor of
// calls, and the owner of running executions. Build one with New; register
// tools and set the store before the first call (or before Start). All
// methods are safe for concurrent use.
type Runtime struct {
	cfg Config

	mu    sync.RWMutex
	tools map[string]*tool
	// toolsGen counts changes of tools (ToolsGeneration).
	toolsGen  atomic.Uint64
	groups    map[string]*toolGroup // tool groups by prefix (group.go)
	backend   Backend
	setupErrs []error
	// probeOwner tells RunProbes whether this node probes (nil: always).
	probeOwner func() bool
	// auditor is SetAuditor's.
	auditor Auditor

	runs *runningSet
	// approving serializes the approvals of one execution on this node
	// (Decide).
	approving keyLocks
	bg        inflight     // background release retries, approval notifications
	notes     *notifier    // approval notifications (notifysend.go)
	phase     atomic.Int32 // phaseUngated, phaseStarting, phaseStarted
	// subscribe subscribes to the backend's cancels once.
	subscribe sync.Once
	closing   chan struct{}
	closed    sync.Once
	now       func() time.Time
	// obs is observers, as an Observer.
	obs       Observer
	observers *observerSet
}

// Liveness tells whether another node's runner is known to be gone (gossip
// declared it dead, or it is no longer a cluster member; a fleet node's
// heartbeat lapsed). A single node knows none gone. Part of Backend.
type Liveness interface {
	RunnerGone(nodeID string) bool
}

// New returns a new runtime with the default configuration changed by
// opts, backed by the default bounded in-memory store. A configuration
// that cannot work is reported by Err (and Start).
func New(opts ...Option) *Runtime {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	r := &Runtime{
		cfg:       cfg,
		tools:     make(map[string]*tool),
		backend:   store.NewMemory(store.DefaultCapacity),
		runs:      newRunningSet(),
		notes:     newNotifier(),
		closing:   make(chan struct{}),
		now:       func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) },
		observers: newObserverSet(cfg.Observer),
	}
	r.obs = r.observers
	if err := cfg.Validate(); err != nil {
		r.setupErrs = append(r.setupErrs, err)
	}
	return r
}

// Tool registers a tool under name. A problem (a duplicate name, an invalid
// schema) is returned by Err and by Start.
func (r *Runtime) Tool(name string, fn ToolFunc, opts ...ToolOption) {
	spec := ToolSpec{Name: name, Func: fn}
	for _, o := range opts {
		o(&spec)
	}
	if err := r.AddTool(spec); err != nil {
		r.mu.Lock()
		r.setupErrs = append(r.setupErrs, err)
		r.mu.Unlock()
	}
}

// AddTool registers a tool and reports any problem at once.
func (r *Runtime) AddTool(spec ToolSpec) error {
	t, err := newTool(spec)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[t.Name]; dup {
		return fmt.Errorf("tool %q: registered twice", t.Name)
	}
	if _, ok := r.groups[groupOf(t.Name)]; ok {
		return fmt.Errorf("tool %q: its prefix names a tool group", t.Name)
	}
	r.tools[t.Name] = t
	r.toolsGen.Add(1)
	return nil
}

// IdempotencyStore replaces the backend: the store and what it knows
// beside (Backend). Call it before the first call. A *store.Memory, a
// cluster node's store and a PostgreSQL fleet node are backends; wrap any
// other store.Store in Basic.
func (r *Runtime) IdempotencyStore(b Backend) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b == nil {
		r.setupErrs = append(r.setupErrs, errors.New("IdempotencyStore: nil backend"))
		return
	}
	r.backend = b
}

// Err returns the problems found while setting the runtime up, joined.
func (r *Runtime) Err() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return errors.Join(r.setupErrs...)
}

// Store returns the runtime's backend: its store, and what it knows
// beside.
func (r *Runtime) Store() Backend {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.backend
}

// Config returns the runtime's configuration.
func (r *Runtime) Config() Config { return r.cfg }

// Tools returns the registered tools, sorted by name.
func (r *Runtime) Tools() []ToolInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]ToolInfo, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t.info())
	}
	slices.SortFunc(out, func(a, b ToolInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ToolsFor returns the registered tools caller may call, sorted by name:
// every tool for a caller without an allow-list, else those on it. It is
// the one rule of which tools a caller is shown: GET /v1/tools, MCP's
// tools/list (besides its reconcile tools, which every caller may call)
// and the tool list subscriptions/listen watches all show ToolsFor.
func (r *Runtime) ToolsFor(caller Caller) []ToolInfo {
	tools := r.Tools()
	if caller.Tools == nil {
		return tools
	}
	out := tools[:0]
	for _, t := range tools {
		if caller.MayCall(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// ToolsGeneration changes whenever the set of tools does (a tool is
// registered, or a tool group's tools are replaced), so that a server
// mirroring Tools (the MCP endpoint) re-reads them only then. It is cheap
// enough to call on every request.
func (r *Runtime) ToolsGeneration() uint64 { return r.toolsGen.Load() }

func (r *Runtime) isClosing() bool {
	select {
	case <-r.closing:
		return true
	default:
		return false
	}
}

// Running returns the number of executions running on this node now.
func (r *Runtime) Running() int { return r.runs.len() }

// InflightBytes returns the bytes of arguments and results the calls on
// this node hold in flight now (Config.MaxInflightBytes).
func (r *Runtime) InflightBytes() int64 { return r.runs.inflightBytes() }

// MaxInflightBytes returns the bound on InflightBytes (0: none).
func (r *Runtime) MaxInflightBytes() int64 { return r.cfg.MaxInflightBytes }
