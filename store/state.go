package store

import (
	"bytes"
	"cmp"
	"slices"
	"time"
)

// State is the deterministic table of records behind Memory and the
// replicated state machine. Every method depends only on its arguments and
// the State, never on clocks or randomness, so replicas that apply the same
// operations in the same order reach the same State.
//
// State is not safe for concurrent use; its owner serialises access.
// Records it returns are copies; Data and Error share its backing arrays and
// are read-only.
type State struct {
	capacity int
	lastSeq  uint64
	byKey    map[Key]*Record
	byID     map[string]Key
	sessions map[sessionKey]map[string]struct{}
	// perPrincipal counts each principal's records (absent: none). insert
	// and remove keep it, so it is derived from byKey alone.
	perPrincipal map[string]int
}

type sessionKey struct{ principal, session string }

// NewState returns an empty State holding at most capacity records.
func NewState(capacity int) *State {
	return &State{
		capacity:     capacity,
		byKey:        make(map[Key]*Record),
		byID:         make(map[string]Key),
		sessions:     make(map[sessionKey]map[string]struct{}),
		perPrincipal: make(map[string]int),
	}
}

// Capacity returns the bound on records.
func (s *State) Capacity() int { return s.capacity }

// SetCapacity changes the bound. Records beyond a lowered bound stay (none
// is ever evicted); new identities are refused until the count drops.
func (s *State) SetCapacity(n int) { s.capacity = n }

// Len returns the number of records.
func (s *State) Len() int { return len(s.byKey) }

// PrincipalEntries returns the number of records principal holds: running,
// interrupted and finished.
func (s *State) PrincipalEntries(principal string) int { return s.perPrincipal[principal] }

// LastSeq returns the highest Seq ever assigned (0 when none).
func (s *State) LastSeq() uint64 { return s.lastSeq }

// Reserve implements Store.Reserve with seq as the new record's Seq; seq
// must be greater than LastSeq. A new identity is refused with ErrCapacity
// when the State is full, and with a *QuotaError when exec.Quota > 0 and
// key.Principal already holds exec.Quota records or more; an identity the
// State holds is answered (replay, conflict, uncertain) whatever the bounds,
// except a finished record exec.DedupeWindow has expired (Execution.Expired),
// which the new execution replaces.
func (s *State) Reserve(key Key, fingerprint string, exec Execution, seq uint64) (Reservation, error) {
	switch {
	case key.RequestID == "":
		return Reservation{}, invalidf("reserve: empty request_id")
	case fingerprint == "":
		return Reservation{}, invalidf("reserve: empty fingerprint")
	case exec.ID == "":
		return Reservation{}, invalidf("reserve: empty execution id")
	case seq <= s.lastSeq:
		return Reservation{}, invalidf("reserve: seq %d not above %d", seq, s.lastSeq)
	case exec.Quota < 0:
		return Reservation{}, invalidf("reserve: negative quota %d", exec.Quota)
	case exec.DedupeWindow < 0:
		return Reservation{}, invalidf("reserve: negative dedupe window %s", exec.DedupeWindow)
	}
	if r, ok := s.byKey[key]; ok && r.Fingerprint == fingerprint && exec.Expired(*r) {
		// Past the dedupe window: a fresh execution replaces the record
		// (its count and the principal's stay as they are).
		if _, dup := s.byID[exec.ID]; dup {
			return Reservation{}, invalidf("reserve: execution id %s already in use", exec.ID)
		}
		s.remove(r)
		return s.reserve(key, fingerprint, exec, seq), nil
	}
	if r, ok := s.byKey[key]; ok {
		switch {
		case r.Fingerprint != fingerprint:
			return Reservation{Outcome: Conflict, Record: *r}, nil
		case r.Status.Finished():
			return Reservation{Outcome: Replay, Record: *r}, nil
		default:
			return Reservation{Outcome: Uncertain, Record: *r}, nil
		}
	}
	if _, dup := s.byID[exec.ID]; dup {
		return Reservation{}, invalidf("reserve: execution id %s already in use", exec.ID)
	}
	if len(s.byKey) >= s.capacity {
		return Reservation{}, ErrCapacity
	}
	if exec.Quota > 0 && s.perPrincipal[key.Principal] >= exec.Quota {
		return Reservation{}, &QuotaError{Principal: key.Principal, Quota: exec.Quota}
	}
	return s.reserve(key, fingerprint, exec, seq), nil
}

// reserve inserts the new record of a reservation checked by Reserve.
func (s *State) reserve(key Key, fingerprint string, exec Execution, seq uint64) Reservation {
	r := &Record{
		ExecutionID: exec.ID,
		Key:         key,
		Tool:        exec.Tool,
		Fingerprint: fingerprint,
		Status:      StatusRunning,
		NodeID:      exec.NodeID,
		StartedAt:   exec.StartedAt,
		Seq:         seq,
	}
	s.lastSeq = seq
	s.insert(r)
	return Reservation{Outcome: Reserved, Record: *r}
}

// Complete implements Store.Complete.
func (s *State) Complete(key Key, fingerprint string, res Result) (Record, error) {
	if err := res.Validate(); err != nil {
		return Record{}, err
	}
	r, ok := s.byKey[key]
	switch {
	case !ok:
		return Record{}, ErrNotFound
	case r.Fingerprint != fingerprint:
		return Record{}, &ConflictError{Record: *r}
	case r.ExecutionID != res.ExecutionID || !r.Status.Open():
		return Record{}, &StateError{Op: "complete", Record: *r}
	}
	r.apply(res)
	return *r, nil
}

// Get implements Store.Get.
func (s *State) Get(executionID string) (Record, error) {
	key, ok := s.byID[executionID]
	if !ok {
		return Record{}, ErrNotFound
	}
	return *s.byKey[key], nil
}

// Lookup implements Store.Lookup.
func (s *State) Lookup(key Key) (Record, error) {
	r, ok := s.byKey[key]
	if !ok {
		return Record{}, ErrNotFound
	}
	return *r, nil
}

// List implements Store.List.
func (s *State) List(q ListQuery) Page {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var out []Record
	collect := func(ids map[string]struct{}) {
		for id := range ids {
			r := s.byKey[s.byID[id]]
			if q.Before == 0 || r.Seq < q.Before {
				out = append(out, *r)
			}
		}
	}
	if q.AllPrincipals {
		for sk, ids := range s.sessions {
			if sk.session == q.Session {
				collect(ids)
			}
		}
	} else {
		collect(s.sessions[sessionKey{q.Principal, q.Session}])
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(b.Seq, a.Seq) })
	var p Page
	if len(out) > limit {
		out = out[:limit]
		p.Next = out[limit-1].Seq
	}
	p.Records = out
	return p
}

// Cancel implements Store.Cancel.
func (s *State) Cancel(executionID string, res Result) (Record, error) {
	if err := res.Validate(); err != nil {
		return Record{}, err
	}
	if res.Status != StatusCancelled || res.ExecutionID != executionID {
		return Record{}, invalidf("cancel: result must be cancelled for %s", executionID)
	}
	r, err := s.open(executionID, "cancel", func(st Status) bool { return st == StatusRunning })
	if err != nil {
		return Record{}, err
	}
	r.apply(res)
	return *r, nil
}

// Resolve implements Store.Resolve.
func (s *State) Resolve(executionID string, rs Resolution) (Record, error) {
	if err := rs.Validate(); err != nil {
		return Record{}, err
	}
	if (rs.Status != StatusCompleted && rs.Status != StatusFailed) || rs.ExecutionID != executionID {
		return Record{}, invalidf("resolve: outcome must be completed or failed for %s", executionID)
	}
	r, err := s.open(executionID, "resolve", settleable(rs.AllowRunning))
	if err != nil {
		return Record{}, err
	}
	r.apply(rs.Result)
	r.Resolved = true
	return *r, nil
}

// Release implements Store.Release.
func (s *State) Release(executionID string, allowRunning bool) (Record, error) {
	r, err := s.open(executionID, "release", settleable(allowRunning))
	if err != nil {
		return Record{}, err
	}
	s.remove(r)
	return *r, nil
}

// MarkInterrupted implements Store.MarkInterrupted.
func (s *State) MarkInterrupted(nodeID string) int {
	n := 0
	for _, r := range s.byKey {
		if r.NodeID == nodeID && r.Status == StatusRunning {
			r.Status = StatusInterrupted
			n++
		}
	}
	return n
}

// Expire implements Expirer.Expire.
func (s *State) Expire(cutoff time.Time) int {
	n := 0
	for _, r := range s.byKey {
		if r.Status.Finished() && r.FinishedAt.Before(cutoff) {
			s.remove(r)
			n++
		}
	}
	return n
}

// Records returns every record ordered by Seq, for snapshots.
func (s *State) Records() []Record {
	out := make([]Record, 0, len(s.byKey))
	for _, r := range s.byKey {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// Restore replaces the State's contents with recs (as returned by Records)
// and lastSeq. It fails without changing anything when recs hold a
// duplicate identity, execution id or Seq, or a Seq outside 1..lastSeq:
// Reserve never makes such a State, and in one Records' order (and so a
// snapshot's bytes) would depend on map iteration.
func (s *State) Restore(recs []Record, lastSeq uint64) error {
	fresh := NewState(s.capacity)
	fresh.lastSeq = lastSeq
	seqs := make(map[uint64]struct{}, len(recs))
	for i := range recs {
		r := recs[i]
		if _, dup := fresh.byKey[r.Key]; dup {
			return invalidf("restore: duplicate identity %s", r.Key)
		}
		if _, dup := fresh.byID[r.ExecutionID]; dup {
			return invalidf("restore: duplicate execution id %s", r.ExecutionID)
		}
		if _, dup := seqs[r.Seq]; dup || r.Seq == 0 || r.Seq > lastSeq {
			return invalidf("restore: seq %d of %s duplicate or outside 1..%d", r.Seq, r.ExecutionID, lastSeq)
		}
		seqs[r.Seq] = struct{}{}
		r.Data, r.Error = clone(r.Data), clone(r.Error)
		fresh.insert(&r)
	}
	*s = *fresh
	return nil
}

// Equal reports whether two States hold the same records and LastSeq. The
// per-principal counts are derived from the records and not compared.
func (s *State) Equal(o *State) bool {
	if s.lastSeq != o.lastSeq || len(s.byKey) != len(o.byKey) {
		return false
	}
	for k, a := range s.byKey {
		b, ok := o.byKey[k]
		if !ok || !recordsEqual(*a, *b) {
			return false
		}
	}
	return true
}

func recordsEqual(a, b Record) bool {
	return a.ExecutionID == b.ExecutionID && a.Key == b.Key && a.Tool == b.Tool &&
		a.Fingerprint == b.Fingerprint && a.Status == b.Status && a.NodeID == b.NodeID &&
		a.StartedAt.Equal(b.StartedAt) && a.FinishedAt.Equal(b.FinishedAt) &&
		a.Resolved == b.Resolved && a.Seq == b.Seq &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Error, b.Error)
}

// open returns the record of executionID when allowed accepts its status,
// ErrNotFound or a *StateError otherwise.
func (s *State) open(executionID, op string, allowed func(Status) bool) (*Record, error) {
	key, ok := s.byID[executionID]
	if !ok {
		return nil, ErrNotFound
	}
	r := s.byKey[key]
	if !allowed(r.Status) {
		return nil, &StateError{Op: op, Record: *r}
	}
	return r, nil
}

// settleable accepts interrupted executions, and running ones when
// allowRunning: the statuses resolve and release may settle.
func settleable(allowRunning bool) func(Status) bool {
	return func(st Status) bool {
		return st == StatusInterrupted || (st == StatusRunning && allowRunning)
	}
}

func (s *State) insert(r *Record) {
	s.byKey[r.Key] = r
	s.byID[r.ExecutionID] = r.Key
	sk := sessionKey{r.Key.Principal, r.Key.Session}
	ids := s.sessions[sk]
	if ids == nil {
		ids = make(map[string]struct{})
		s.sessions[sk] = ids
	}
	ids[r.ExecutionID] = struct{}{}
	s.perPrincipal[r.Key.Principal]++
}

func (s *State) remove(r *Record) {
	delete(s.byKey, r.Key)
	delete(s.byID, r.ExecutionID)
	sk := sessionKey{r.Key.Principal, r.Key.Session}
	delete(s.sessions[sk], r.ExecutionID)
	if len(s.sessions[sk]) == 0 {
		delete(s.sessions, sk)
	}
	if s.perPrincipal[r.Key.Principal]--; s.perPrincipal[r.Key.Principal] <= 0 {
		delete(s.perPrincipal, r.Key.Principal)
	}
}
