package engine

import (
	"strings"

	"github.com/carmyhq/carmy/store"
)

// Caller is who makes a call, as authentication established it, and what
// it may do. The runtime authorizes every call and every read or change of
// an execution against it, once per request. Callers are comparable.
type Caller struct {
	Principal string
	// Admin sees and reconciles every principal's executions, and may
	// administer the cluster.
	Admin bool
	// MaxEntries is the most records this principal may hold cluster-wide:
	// a call of a new identity once it holds that many is refused with
	// IDEMPOTENCY_CAPACITY (a *store.QuotaError). 0 means no per-principal
	// bound (the store's capacity still applies).
	MaxEntries int
	// MaxBytes is the most bytes (store.RecordSize summed over its
	// records) this principal may hold cluster-wide. A call of a new
	// identity is refused with IDEMPOTENCY_CAPACITY (a *store.QuotaError
	// with Bytes) unless its record and the largest result the runtime
	// records (Config.MaxResultBytes) fit; an outcome that no longer fits
	// when the tool returns is recorded as a bounded failure (code
	// IDEMPOTENCY_CAPACITY, no data: see store.Store.Complete). 0 means no
	// per-principal bound (the store's bound on bytes still applies).
	MaxBytes int64
	// Tools, when not nil, holds the only tools the caller may call: a
	// call of another is FORBIDDEN (a *ForbiddenError), and an execution
	// of another reads as absent (store.ErrNotFound) to Execution, Lookup,
	// Cancel and Resolve and is left out of List. Nil allows every tool.
	Tools *ToolSet
}

// AnonymousPrincipal is the principal of every caller when auth is off.
const AnonymousPrincipal = "anonymous"

// MayCall reports whether the caller may call tool, and reach its
// executions.
func (c Caller) MayCall(tool string) bool { return c.Tools == nil || c.Tools.Has(tool) }

// MaySeeServer reports whether the caller may see what the MCP server
// server behind the gateway offers besides tools (its resources,
// resource templates and prompts): a caller without an allow-list sees
// every server's; one with an allow-list sees those of the servers it may
// call a tool of (the list names some "<server>.<tool>").
func (c Caller) MaySeeServer(server string) bool {
	return c.Tools == nil || c.Tools.HasPrefix(server+".")
}

// maySee reports whether the caller may see rec: its own (any
// principal's for an admin), of a tool it may call.
func (c Caller) maySee(rec store.Record) bool {
	return (c.Admin || rec.Key.Principal == c.Principal) && c.MayCall(rec.Tool)
}

// ToolSet is an immutable set of tool names. The zero value and nil are
// empty.
type ToolSet struct{ names map[string]struct{} }

// NewToolSet returns the set of names.
func NewToolSet(names ...string) *ToolSet {
	s := &ToolSet{names: make(map[string]struct{}, len(names))}
	for _, n := range names {
		s.names[n] = struct{}{}
	}
	return s
}

// HasPrefix reports whether a name in the set begins with prefix.
func (s *ToolSet) HasPrefix(prefix string) bool {
	if s == nil {
		return false
	}
	for n := range s.names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// Has reports whether name is in the set.
func (s *ToolSet) Has(name string) bool {
	if s == nil {
		return false
	}
	_, ok := s.names[name]
	return ok
}
