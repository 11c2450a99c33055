package store

import (
	"encoding/json"
	"fmt"
)

// RecordOverhead is the fixed part of RecordSize: what a record costs
// beyond its variable-length fields (its times, Seq, Resolved, and the
// bookkeeping around it), as a round number. The status is part of it,
// not of the lengths: marking a record interrupted must not change what it
// is accounted for. It is part of the
// accounting every replica does alike: never change it without a new
// snapshot version, or replicas of different builds would disagree on
// the bytes a principal holds.
const RecordOverhead = 64

// RecordSize is the size a record is accounted for by byte quotas
// (Execution.ByteQuota, Result.ByteQuota) and a store's bound on bytes
// (State.SetMaxBytes): RecordOverhead plus the lengths of what a store
// keeps of it, namely the key's three strings, the execution id, tool,
// fingerprint and node id, and the result's data and error bytes.
// A call's arguments are not stored (only their fingerprint), so they
// cost nothing, except on a record gated for approval, which keeps them
// (ApprovalGate.Arguments and Metadata count). RecordSize depends on the record alone, is cheap (no
// encoding) and is the one definition every store uses, so that replicas
// and back ends account alike. It is a measure of what a record holds,
// not of the memory it takes: see the README's sizing section for that.
func RecordSize(r Record) int64 {
	n := RecordOverhead + len(r.Key.Principal) + len(r.Key.Session) + len(r.Key.RequestID) +
		len(r.ExecutionID) + len(r.Tool) + len(r.Fingerprint) + len(r.NodeID)
	if g := r.Approval; g != nil {
		// A gated record keeps the call's arguments (ApprovalGate).
		n += len(g.Arguments) + len(g.Metadata)
	}
	return int64(n) + OutcomeSize(r.Data, r.Error)
}

// OutcomeSize is the part of RecordSize an outcome brings: its data and
// error bytes. What settling an outcome adds to a record is the new
// OutcomeSize less the old.
func OutcomeSize(data, errBody []byte) int64 { return int64(len(data) + len(errBody)) }

// overflowBody is the error recorded instead of an outcome that would not
// fit in its principal's byte quota or the store's bound on bytes.
type overflowBody struct {
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	Principal string `json:"principal,omitempty"`
	Resource  string `json:"resource"`
	Limit     int64  `json:"limit"`
	// Status and Bytes describe the outcome that was not recorded.
	Status Status `json:"outcome_status"`
	Bytes  int64  `json:"outcome_bytes"`
}

// Overflow decides whether growing a record of principal by delta bytes
// fits: it does not when the principal would then hold more than
// byteQuota (> 0) bytes, and then over names the principal; or when the
// store would hold more than maxBytes (> 0), and then over is "". limit
// is the bound exceeded. A record that does not grow always fits. Every
// store decides with this one function, so that they agree on what fits.
func Overflow(principal string, delta, principalBytes, byteQuota, storeBytes, maxBytes int64) (over string, limit int64, exceeded bool) {
	switch {
	case delta <= 0:
		return "", 0, false
	case byteQuota > 0 && principalBytes+delta > byteQuota:
		return principal, byteQuota, true
	case maxBytes > 0 && storeBytes+delta > maxBytes:
		return "", maxBytes, true
	}
	return "", 0, false
}

// OverflowError is the refusal of a write that does not fit, as Overflow
// named it: a *QuotaError for a principal's quota, else a *CapacityError.
func OverflowError(over string, limit int64) error {
	if over != "" {
		return &QuotaError{Principal: over, Bytes: limit}
	}
	return &CapacityError{Resource: ResourceBytes, Limit: limit}
}

// OverflowResult returns the failed result a store records instead of res
// when res does not fit (Overflow): principal is the one whose quota of
// limit bytes it would exceed, or "" for the store's bound. It is small
// and bounded whatever res holds, and depends on its arguments alone, so
// every replica and back end records the same bytes.
func OverflowResult(res Result, principal string, limit int64) Result {
	b := overflowBody{Code: CodeCapacity, Resource: ResourceBytes, Limit: limit, Status: res.Status, Bytes: int64(len(res.Data) + len(res.Error))}
	if principal != "" {
		b.Principal = principal
		b.Message = fmt.Sprintf("the tool ran, but its outcome (%s, %d bytes) was not recorded: the record would take principal %q over its quota of %d bytes; "+
			"this failure is recorded and replayed instead", res.Status, b.Bytes, principal, limit)
	} else {
		b.Message = fmt.Sprintf("the tool ran, but its outcome (%s, %d bytes) was not recorded: the record would take the store over its bound of %d bytes; "+
			"this failure is recorded and replayed instead", res.Status, b.Bytes, limit)
	}
	body, err := json.Marshal(b)
	if err != nil { // a struct of strings and numbers always encodes
		body = []byte(`{"code":"IDEMPOTENCY_CAPACITY","message":"the tool ran, but its outcome was not recorded"}`)
	}
	return Result{ExecutionID: res.ExecutionID, Status: StatusFailed, Error: body, FinishedAt: res.FinishedAt, ByteQuota: res.ByteQuota}
}
