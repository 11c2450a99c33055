package store

import (
	"context"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Outcome is what Reserve found for an identity.
type Outcome int

// Reserve outcomes.
const (
	// Reserved: the identity was vacant and is now reserved for the
	// proposed execution, which may run.
	Reserved Outcome = iota + 1
	// Replay: the identity has a finished record with the same fingerprint.
	Replay
	// Conflict: the identity has a record with a different fingerprint.
	Conflict
	// Uncertain: the identity has a running or interrupted record with the
	// same fingerprint; the tool must not run again.
	Uncertain
	// Awaiting: the identity has a record awaiting approval with the same
	// fingerprint; the tool runs only once someone approves it.
	Awaiting
)

func (o Outcome) String() string {
	switch o {
	case Reserved:
		return "reserved"
	case Replay:
		return "replay"
	case Conflict:
		return "conflict"
	case Uncertain:
		return "uncertain"
	case Awaiting:
		return "awaiting"
	}
	return "unknown"
}

// Reservation is Reserve's answer: the outcome and the identity's record as
// it stands after the call (the new record when Reserved).
type Reservation struct {
	Outcome Outcome
	Record  Record
}

// Resolution settles an open execution with an outcome established outside
// Carmy (docs/api.md#reconciling-cancel-and-resolve).
type Resolution struct {
	Result
	// AllowRunning permits settling a running execution. Callers set it
	// only when they know the runner is gone (its node is dead or no longer
	// a member), or when they are the runner releasing a reservation whose
	// tool never started.
	AllowRunning bool
	// By is who established the outcome: the resolving principal, or
	// ResolvedByProbe. It is kept as the record's ResolvedBy (at most
	// MaxResolvedBy bytes).
	By string
}

// ResolvedByProbe is the Resolution.By of an outcome a reconcile probe
// established (docs/config.md#reconcile-probes).
const ResolvedByProbe = "probe"

// MaxResolvedBy bounds Resolution.By: a principal's name or "probe".
const MaxResolvedBy = 255

// Validate reports whether rs is a well-formed resolution: its Result is
// (Result.Validate), and By is at most MaxResolvedBy bytes of valid UTF-8
// without NUL.
func (rs Resolution) Validate() error {
	if err := rs.Result.Validate(); err != nil {
		return err
	}
	if len(rs.By) > MaxResolvedBy || !utf8.ValidString(rs.By) || strings.ContainsRune(rs.By, 0) {
		return invalidf("resolved by: at most %d bytes of UTF-8 without NUL", MaxResolvedBy)
	}
	return nil
}

// ListQuery selects records for listing. Its filters are applied by the
// store before Limit, and combine by AND: a page holds Limit matching
// records whenever that many exist before Before.
type ListQuery struct {
	// Principal restricts the listing to one principal unless
	// AllPrincipals is set.
	Principal     string
	AllPrincipals bool
	// Session selects one session ("" is a session too), unless
	// AllSessions is set.
	Session     string
	AllSessions bool
	// Statuses, when not empty, keeps only the records whose status is
	// one of them (a status that is not Valid matches nothing).
	Statuses []Status
	// Tool, when not "", keeps only the records of that tool.
	Tool string
	// Attention keeps only the records that need a person: the
	// interrupted ones, and the running ones whose NodeID is in
	// GoneNodes (nodes whose runner is known to be gone, as the caller
	// established it: see RunningNodeLister).
	Attention bool
	GoneNodes []string
	// Limit is the page size; 0 or less means DefaultListLimit.
	Limit int
	// Before continues a listing: only records with Seq < Before. 0 starts
	// from the newest.
	Before uint64
}

// Match reports whether r is selected by q's principal, session, status,
// tool, attention and Before. Stores that filter in memory use it, so
// that every one of them selects alike.
func (q *ListQuery) Match(r *Record) bool {
	switch {
	case q.Before != 0 && r.Seq >= q.Before:
		return false
	case !q.AllPrincipals && r.Key.Principal != q.Principal:
		return false
	case !q.AllSessions && r.Key.Session != q.Session:
		return false
	case q.Tool != "" && r.Tool != q.Tool:
		return false
	case len(q.Statuses) > 0 && !slices.Contains(q.Statuses, r.Status):
		return false
	case q.Attention:
		return r.Status == StatusInterrupted || (r.Status == StatusRunning && slices.Contains(q.GoneNodes, r.NodeID))
	}
	return true
}

// RunningNodeLister names the nodes holding running records, a part of
// the engine's Backend: the only nodes whose liveness matters to a
// listing with ListQuery.Attention. A runtime asks it, decides which of
// those nodes are gone, and passes them as ListQuery.GoneNodes.
type RunningNodeLister interface {
	// RunningNodes returns the distinct NodeIDs of the running records,
	// sorted.
	RunningNodes(ctx context.Context) ([]string, error)
}

// DefaultListLimit and MaxListLimit bound a page of List.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)

// Page is one page of a listing, newest first. Next is the Before of the
// following page, 0 when there is none.
type Page struct {
	Records []Record
	Next    uint64
}

// Stats describes a store's occupancy.
type Stats struct {
	// Entries counts every record: running, interrupted and finished.
	Entries int
	// Capacity is the bound on Entries.
	Capacity int
	// Bytes is RecordSize summed over every record, and MaxBytes its bound
	// (0: none, or a store that does not account bytes).
	Bytes    int64
	MaxBytes int64
}

// InterruptedCounter counts a store's interrupted records (the
// carmy_executions_interrupted gauge), a part of the engine's Backend:
// the executions waiting for an operator to reconcile them.
type InterruptedCounter interface {
	Interrupted(ctx context.Context) (int, error)
}

// Store records reservations and outcomes of tool calls. Implementations
// must be safe for concurrent use, and every write must be durable (to the
// degree the implementation promises) before it returns.
//
// A write that returns ErrUnavailable was not applied. A write that returns
// ErrCommitUnknown may or may not have been applied: the caller must find
// out (Get, Lookup) rather than assume. All other errors mean the write was
// not applied.
type Store interface {
	// Reserve atomically compares fingerprint with the identity's record
	// and, when the identity is vacant, reserves it for exec with status
	// running. When the store is full it returns ErrCapacity and reserves
	// nothing; when exec.Quota > 0 and the principal (key.Principal)
	// already holds that many records, it returns a *QuotaError
	// (ErrCapacity too) and reserves nothing. Either way it still answers
	// Replay, Conflict and Uncertain for identities it holds. A store that
	// ignores Quota fails storetest's PrincipalQuota case.
	//
	// Bytes are bounded alike, by RecordSize: a new identity whose record
	// plus exec.Headroom would not fit in the store's bound on bytes is
	// refused with a *CapacityError, and one that would not fit in
	// exec.ByteQuota (the principal's bytes) with a *QuotaError whose
	// Bytes is set; both match ErrCapacity and reserve nothing (storetest's
	// ByteQuota case).
	//
	// When exec.DedupeWindow > 0, a finished record of the identity with
	// the same fingerprint that started DedupeWindow or more before
	// exec.StartedAt (Execution.Expired) is replaced by the new
	// reservation, Reserved, counted as before (docs/mcp.md#calls-without-a-request-id-dedupe_window); a store that
	// ignores it fails storetest's DedupeWindow case.
	Reserve(ctx context.Context, key Key, fingerprint string, exec Execution) (Reservation, error)

	// Complete records res for the identity. It applies only when the
	// record still belongs to res.ExecutionID and is running or
	// interrupted; otherwise it returns a *StateError (ErrInvalidState)
	// carrying the record as it stands. A different fingerprint is
	// ErrConflict; no record is ErrNotFound. The result is durable before
	// Complete returns.
	//
	// The tool has run by then, so a result that does not fit is not
	// refused: when recording it would take the principal over
	// res.ByteQuota, or the store over its bound on bytes, Complete
	// records instead a failed outcome with a small error object (code
	// IDEMPOTENCY_CAPACITY; "principal" when the quota was the principal's,
	// "resource": "bytes", "limit", and the status and size of the outcome
	// that was not kept) and returns that record. The fact that the tool
	// ran is never lost and the record never stays running; the bounds are
	// exceeded at most by these small errors (and cancellations').
	//
	// A res whose Status is interrupted (no data, no error, no finish
	// time) is the runner's own word that the tool's answer was lost: the
	// record becomes (or stays) interrupted, open to reconciliation, under
	// the same conditions.
	Complete(ctx context.Context, key Key, fingerprint string, res Result) (Record, error)

	// Get returns the record of an execution, or ErrNotFound.
	Get(ctx context.Context, executionID string) (Record, error)

	// Lookup returns the record of an identity, or ErrNotFound.
	Lookup(ctx context.Context, key Key) (Record, error)

	// List returns one page of the records q selects, newest first
	// (by Seq), filtered before the page is cut (ListQuery.Match). A
	// store that filters a page after cutting it, or ignores a filter,
	// fails storetest's ListFilters and ListFilteredPages cases.
	List(ctx context.Context, q ListQuery) (Page, error)

	// Cancel records res (status cancelled) for a running execution and
	// returns the record; any other status is a *StateError.
	Cancel(ctx context.Context, executionID string, res Result) (Record, error)

	// Resolve records an outcome (completed or failed) for an interrupted
	// execution, or a running one when r.AllowRunning, and marks it
	// resolved; any other status is a *StateError. An outcome that does
	// not fit in r.ByteQuota or the store's bound on bytes is refused (a
	// *QuotaError or *CapacityError) and nothing changes.
	Resolve(ctx context.Context, executionID string, r Resolution) (Record, error)

	// Release removes the reservation of an interrupted execution, or of a
	// running one when allowRunning, so that the next call of the identity
	// runs the tool. It returns the removed record; any other status is a
	// *StateError.
	Release(ctx context.Context, executionID string, allowRunning bool) (Record, error)

	// Decide takes decision d on a record awaiting approval
	// (docs/policy.md#approval-gates) and returns the record as it then
	// stands. It applies only to an awaiting_approval record; any other
	// status is a *StateError carrying the record as it stands, so of
	// concurrent decisions exactly one applies and the others learn the
	// winner's. Approve makes the record running on d.NodeID under a new
	// Seq (a new fencing token): from then on it is an ordinary running
	// execution. Deny records denied; expire records expired, and only
	// when d.At is at or after the gate's ExpiresAt (before, a
	// *StateError); an approve or deny at or after it records expired
	// instead (Decision.Effect). The decision is kept on the record
	// (Record.Decision). A store that decides otherwise fails storetest's
	// Approval cases.
	Decide(ctx context.Context, executionID string, d Decision) (Record, error)

	// MarkInterrupted marks every running execution of nodeID interrupted
	// and returns how many it marked.
	MarkInterrupted(ctx context.Context, nodeID string) (int, error)

	// Stats returns the store's occupancy.
	Stats(ctx context.Context) (Stats, error)
}

// Peeker tells at once, from state held locally, the finished record of
// an identity; a part of the engine's Backend (a store with no local
// state answers ok false). A finished record never changes (but for a
// derived identity's, which a dedupe window may replace: a replicated
// store's replica answers none of those), so the runtime answers a retry
// of it (a replay or a conflict) from PeekFinished without preparing an
// execution or writing.
// ok is false when the identity has no finished record here (none, or not
// yet known to this node, or running): the call then goes through Reserve.
type Peeker interface {
	PeekFinished(key Key) (rec Record, ok bool)
}

// Expirer is implemented by stores that can drop finished records.
type Expirer interface {
	// Expire removes finished records that finished before cutoff and
	// returns how many it removed. Running and interrupted records are
	// never removed.
	Expire(ctx context.Context, cutoff time.Time) (int, error)
}
