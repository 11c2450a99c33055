package store

import (
	"bytes"
	"cmp"
	"maps"
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
	byID     map[string]*Record
	// sessions indexes the records of each principal's session by
	// execution id, for List: the same records as byKey, by pointer.
	sessions map[sessionKey]map[string]*Record
	// perPrincipal counts each principal's records (absent: none). insert
	// and remove keep it, so it is derived from byKey alone.
	perPrincipal map[string]int
	// maxBytes bounds bytes (0: no bound). bytes is RecordSize summed
	// over every record, principalBytes over each principal's (absent:
	// none); insert, remove and resize keep both, so they too are derived
	// from byKey alone, and a restored State recomputes them.
	maxBytes       int64
	bytes          int64
	principalBytes map[string]int64
	// unfinished holds the records not yet finished (running,
	// interrupted, awaiting approval) by execution id: the same records
	// as byKey, by pointer. The loops that look for them (approval
	// expiry every second, the leader's check for runners that are no
	// longer members, the interrupted gauge, attention listings, marking
	// a node's executions interrupted) visit these few instead of
	// every record, so their cost does not grow with history. insert,
	// remove and track keep it, so it too is derived from byKey alone.
	unfinished map[string]*Record
}

type sessionKey struct{ principal, session string }

// NewState returns an empty State holding at most capacity records.
func NewState(capacity int) *State {
	return &State{
		capacity:       capacity,
		byKey:          make(map[Key]*Record),
		byID:           make(map[string]*Record),
		sessions:       make(map[sessionKey]map[string]*Record),
		perPrincipal:   make(map[string]int),
		principalBytes: make(map[string]int64),
		unfinished:     make(map[string]*Record),
	}
}

// MaxBytes returns the bound on bytes (0: none).
func (s *State) MaxBytes() int64 { return s.maxBytes }

// SetMaxBytes changes the bound on bytes, the sum of RecordSize over
// every record (0 or less: no bound). Like SetCapacity it evicts nothing:
// new identities are refused until there is room again.
func (s *State) SetMaxBytes(n int64) { s.maxBytes = max(n, 0) }

// Bytes returns RecordSize summed over every record.
func (s *State) Bytes() int64 { return s.bytes }

// PrincipalBytes returns RecordSize summed over principal's records.
func (s *State) PrincipalBytes(principal string) int64 { return s.principalBytes[principal] }

// Capacity returns the bound on records.
func (s *State) Capacity() int { return s.capacity }

// SetCapacity changes the bound. Records beyond a lowered bound stay (none
// is ever evicted); new identities are refused until the count drops.
func (s *State) SetCapacity(n int) { s.capacity = n }

// Len returns the number of records.
func (s *State) Len() int { return len(s.byKey) }

// Interrupted counts the interrupted records: executions whose runner died
// and that answer EXECUTION_UNCERTAIN until someone resolves them. It
// looks at every unfinished record.
func (s *State) Interrupted() int {
	n := 0
	for _, r := range s.unfinished {
		if r.Status == StatusInterrupted {
			n++
		}
	}
	return n
}

// PrincipalEntries returns the number of records principal holds: running,
// interrupted and finished.
func (s *State) PrincipalEntries(principal string) int { return s.perPrincipal[principal] }

// LastSeq returns the highest Seq ever assigned (0 when none).
func (s *State) LastSeq() uint64 { return s.lastSeq }

// Reserve implements Store.Reserve with seq as the new record's Seq; seq
// must be greater than LastSeq. A new identity is refused with ErrCapacity
// when the State is full, with a *QuotaError when exec.Quota > 0 and
// key.Principal already holds exec.Quota records or more, with a
// *CapacityError when the new record and exec.Headroom do not fit in
// MaxBytes, and with a *QuotaError (Bytes set) when they do not fit in
// exec.ByteQuota; an identity the State holds is answered (replay,
// conflict, uncertain) whatever the bounds, except a finished record
// exec.DedupeWindow has expired (Execution.Expired), which the new
// execution replaces when the bounds allow the new one in its place.
func (s *State) Reserve(key Key, fingerprint string, exec Execution, seq uint64) (Reservation, error) {
	switch {
	case key.RequestID == "":
		return Reservation{}, invalidf("reserve: empty request_id")
	case fingerprint == "":
		return Reservation{}, invalidf("reserve: empty fingerprint")
	case seq <= s.lastSeq:
		return Reservation{}, invalidf("reserve: seq %d not above %d", seq, s.lastSeq)
	}
	if err := exec.Validate(); err != nil {
		return Reservation{}, err
	}
	held, ok := s.byKey[key]
	// Past its dedupe window, a finished record of the same fingerprint is
	// replaced by a fresh execution: its count and the principal's stay,
	// its bytes are given back (checked before it goes, so a refusal
	// leaves it in place). Any other held record is answered.
	replace := false
	if ok {
		if out := exec.Held(*held, fingerprint); out != Reserved {
			return Reservation{Outcome: out, Record: *held}, nil
		}
		replace = true
	}
	if _, dup := s.byID[exec.ID]; dup {
		return Reservation{}, invalidf("reserve: execution id %s already in use", exec.ID)
	}
	var freed int64
	if replace {
		freed = RecordSize(*held)
	} else {
		if len(s.byKey) >= s.capacity {
			return Reservation{}, ErrCapacity
		}
		if exec.Quota > 0 && s.perPrincipal[key.Principal] >= exec.Quota {
			return Reservation{}, &QuotaError{Principal: key.Principal, Quota: exec.Quota}
		}
	}
	r := s.newRecord(key, fingerprint, exec, seq)
	if err := s.fits(key, r, exec, freed); err != nil {
		return Reservation{}, err
	}
	if replace {
		s.remove(held)
	}
	s.lastSeq = seq
	s.insert(r)
	return Reservation{Outcome: Reserved, Record: *r}, nil
}

// newRecord is the running record a reservation inserts.
func (s *State) newRecord(key Key, fingerprint string, exec Execution, seq uint64) *Record {
	status := StatusRunning
	if exec.Approval != nil {
		status = StatusAwaitingApproval
	}
	r := &Record{
		ExecutionID: exec.ID,
		Key:         key,
		Tool:        exec.Tool,
		Fingerprint: fingerprint,
		Status:      status,
		NodeID:      exec.NodeID,
		StartedAt:   exec.StartedAt,
		Seq:         seq,
		Approval:    exec.Approval.clone(),
	}
	r.packStrings()
	return r
}

// fits checks the bounds on bytes for r, a new record of key's principal,
// with exec.Headroom for its result, once freed bytes (of a record r
// replaces) are given back: a *CapacityError over MaxBytes, a *QuotaError
// (Bytes set) over exec.ByteQuota.
func (s *State) fits(key Key, r *Record, exec Execution, freed int64) error {
	need := RecordSize(*r) + exec.Headroom - freed
	if s.maxBytes > 0 && s.bytes+need > s.maxBytes {
		return &CapacityError{Resource: ResourceBytes, Limit: s.maxBytes}
	}
	if exec.ByteQuota > 0 && s.principalBytes[key.Principal]+need > exec.ByteQuota {
		return &QuotaError{Principal: key.Principal, Quota: exec.Quota, Bytes: exec.ByteQuota}
	}
	return nil
}

// Complete implements Store.Complete. An outcome whose record would not
// fit (it grows the record over res.ByteQuota or MaxBytes) is recorded as
// the bounded failure of overflowResult instead.
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
	if over, limit, exceeded := s.overflows(r, res); exceeded {
		res = OverflowResult(res, over, limit)
	}
	s.settle(r, res)
	return *r, nil
}

// overflows decides (Overflow) whether recording res in r fits in r's
// principal's res.ByteQuota and in MaxBytes.
func (s *State) overflows(r *Record, res Result) (over string, limit int64, exceeded bool) {
	delta := OutcomeSize(res.Data, res.Error) - OutcomeSize(r.Data, r.Error)
	p := r.Key.Principal
	return Overflow(p, delta, s.principalBytes[p], res.ByteQuota, s.bytes, s.maxBytes)
}

// settle applies res to r and accounts for its new size.
func (s *State) settle(r *Record, res Result) {
	before := RecordSize(*r)
	r.apply(res)
	s.track(r)
	s.account(r.Key.Principal, RecordSize(*r)-before)
}

// account adds delta bytes to principal's and the State's.
func (s *State) account(principal string, delta int64) {
	s.bytes += delta
	if s.principalBytes[principal] += delta; s.principalBytes[principal] <= 0 {
		delete(s.principalBytes, principal)
	}
}

// Get implements Store.Get.
func (s *State) Get(executionID string) (Record, error) {
	r, ok := s.byID[executionID]
	if !ok {
		return Record{}, ErrNotFound
	}
	return *r, nil
}

// Lookup implements Store.Lookup.
func (s *State) Lookup(key Key) (Record, error) {
	r, ok := s.byKey[key]
	if !ok {
		return Record{}, ErrNotFound
	}
	return *r, nil
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
	// A cancellation's small error is recorded whatever the byte bounds.
	s.settle(r, res)
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
	// An outcome established by an operator is refused, not replaced, when
	// it does not fit: nothing ran, and a smaller one (or release) will do.
	if over, limit, exceeded := s.overflows(r, rs.Result); exceeded {
		return Record{}, OverflowError(over, limit)
	}
	s.settle(r, rs.Result)
	r.Resolved = true
	r.ResolvedBy = rs.By
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
func (s *State) MarkInterrupted(nodeID string) int { return len(s.MarkInterruptedRecords(nodeID)) }

// MarkInterruptedRecords is MarkInterrupted returning the records it
// marked, as they now stand, in Seq order.
func (s *State) MarkInterruptedRecords(nodeID string) []Record {
	var out []Record
	for _, r := range s.unfinished {
		if r.NodeID == nodeID && r.Status == StatusRunning {
			r.Status = StatusInterrupted
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
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
// snapshot's bytes) would depend on map iteration. The bounds (Capacity,
// MaxBytes) stay; the per-principal counts and the bytes are recomputed
// from recs, so they need not be in a snapshot.
func (s *State) Restore(recs []Record, lastSeq uint64) error {
	r := s.Restorer(lastSeq)
	for i := range recs {
		rec := recs[i]
		rec.Data, rec.Error = clone(rec.Data), clone(rec.Error)
		if err := r.Add(rec); err != nil {
			return err
		}
	}
	r.Finish()
	return nil
}

// Restorer rebuilds a State one record at a time, as a snapshot is read,
// so that the records never need to be held twice. Start one with
// State.Restorer, Add every record, then Finish.
type Restorer struct {
	into  *State
	fresh *State
	seqs  map[uint64]struct{}
}

// Restorer returns a Restorer that will replace s's contents with the
// records added to it and lastSeq, keeping s's bounds. s is unchanged
// until Finish.
func (s *State) Restorer(lastSeq uint64) *Restorer {
	fresh := NewState(s.capacity)
	fresh.maxBytes = s.maxBytes
	fresh.lastSeq = lastSeq
	return &Restorer{into: s, fresh: fresh, seqs: make(map[uint64]struct{})}
}

// Add adds one record, taking ownership of its Data and Error. It fails,
// and the Restorer must then be dropped, for a duplicate identity,
// execution id or Seq, or a Seq outside 1..lastSeq (see Restore).
func (r *Restorer) Add(rec Record) error {
	f := r.fresh
	if _, dup := f.byKey[rec.Key]; dup {
		return invalidf("restore: duplicate identity %s", rec.Key)
	}
	if _, dup := f.byID[rec.ExecutionID]; dup {
		return invalidf("restore: duplicate execution id %s", rec.ExecutionID)
	}
	if _, dup := r.seqs[rec.Seq]; dup || rec.Seq == 0 || rec.Seq > f.lastSeq {
		return invalidf("restore: seq %d of %s duplicate or outside 1..%d", rec.Seq, rec.ExecutionID, f.lastSeq)
	}
	r.seqs[rec.Seq] = struct{}{}
	rec.packStrings()
	f.insert(&rec)
	return nil
}

// Finish replaces the State's contents with what was added.
func (r *Restorer) Finish() { *r.into = *r.fresh }

// Equal reports whether two States hold the same records and LastSeq. The
// per-principal counts and the bytes are derived from the records and not
// compared (AccountingEqual does).
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

// AccountingEqual reports whether two States account alike: the same
// bytes in all and for every principal, and the same records per
// principal.
func (s *State) AccountingEqual(o *State) bool {
	return s.bytes == o.bytes && maps.Equal(s.principalBytes, o.principalBytes) && maps.Equal(s.perPrincipal, o.perPrincipal)
}

func recordsEqual(a, b Record) bool {
	return a.ExecutionID == b.ExecutionID && a.Key == b.Key && a.Tool == b.Tool &&
		a.Fingerprint == b.Fingerprint && a.Status == b.Status && a.NodeID == b.NodeID &&
		a.StartedAt.Equal(b.StartedAt) && a.FinishedAt.Equal(b.FinishedAt) &&
		a.Resolved == b.Resolved && a.ResolvedBy == b.ResolvedBy && a.Seq == b.Seq &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Error, b.Error) &&
		gatesEqual(a.Approval, b.Approval) && decisionsEqual(a.Decision, b.Decision)
}

func gatesEqual(a, b *ApprovalGate) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ExpiresAt.Equal(b.ExpiresAt) && slices.Equal(a.Approvers, b.Approvers) &&
		bytes.Equal(a.Arguments, b.Arguments) && bytes.Equal(a.Metadata, b.Metadata)
}

func decisionsEqual(a, b *DecisionRecord) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.By == b.By && a.Reason == b.Reason && a.At.Equal(b.At)
}

// open returns the record of executionID when allowed accepts its status,
// ErrNotFound or a *StateError otherwise.
func (s *State) open(executionID, op string, allowed func(Status) bool) (*Record, error) {
	r, ok := s.byID[executionID]
	if !ok {
		return nil, ErrNotFound
	}
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
	s.byID[r.ExecutionID] = r
	sk := sessionKey{r.Key.Principal, r.Key.Session}
	recs := s.sessions[sk]
	if recs == nil {
		recs = make(map[string]*Record)
		s.sessions[sk] = recs
	}
	recs[r.ExecutionID] = r
	s.track(r)
	s.perPrincipal[r.Key.Principal]++
	s.account(r.Key.Principal, RecordSize(*r))
}

// track files r in unfinished, or takes it out, by its status: every
// change of a held record's status is followed by a call.
func (s *State) track(r *Record) {
	if r.Status.Finished() {
		delete(s.unfinished, r.ExecutionID)
	} else {
		s.unfinished[r.ExecutionID] = r
	}
}

func (s *State) remove(r *Record) {
	delete(s.byKey, r.Key)
	delete(s.byID, r.ExecutionID)
	delete(s.unfinished, r.ExecutionID)
	sk := sessionKey{r.Key.Principal, r.Key.Session}
	delete(s.sessions[sk], r.ExecutionID)
	if len(s.sessions[sk]) == 0 {
		delete(s.sessions, sk)
	}
	if s.perPrincipal[r.Key.Principal]--; s.perPrincipal[r.Key.Principal] <= 0 {
		delete(s.perPrincipal, r.Key.Principal)
	}
	s.account(r.Key.Principal, -RecordSize(*r))
}
