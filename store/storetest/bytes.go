package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/store"
)

// MaxBytesSetter is implemented by stores whose bound on bytes can be set
// directly (store.Memory, the postgres store). The suite's StoreBytes case
// runs only on them; a replicated store's bound is a replicated setting,
// checked by its own tests.
type MaxBytesSetter interface {
	SetMaxBytes(n int64)
}

// sizeOf is the store.RecordSize of the record Reserve makes for ex.
func sizeOf(k store.Key, fp string, ex store.Execution) int64 {
	return store.RecordSize(store.Record{Key: k, ExecutionID: ex.ID, Tool: ex.Tool, Fingerprint: fp, NodeID: ex.NodeID})
}

// withBytes returns a new execution under a byte quota and headroom.
func withBytes(quota, headroom int64) store.Execution {
	ex := newExec("t")
	ex.ByteQuota, ex.Headroom = quota, headroom
	return ex
}

// data returns a JSON string of n bytes.
func data(n int) string { return `"` + strings.Repeat("x", n-2) + `"` }

// wantBytes checks that Stats accounts RecordSize summed over the records
// of keys.
func wantBytes(t *testing.T, s store.Store, keys ...store.Key) {
	t.Helper()
	var sum int64
	for _, k := range keys {
		sum += store.RecordSize(mustLookup(t, s, k))
	}
	st, err := s.Stats(context.Background())
	if err != nil || st.Bytes != sum {
		t.Fatalf("Stats = %+v, %v; want Bytes %d, RecordSize summed over %d records", st, err, sum, len(keys))
	}
}

// wantOverflow checks a record whose outcome did not fit: failed, no
// data, an IDEMPOTENCY_CAPACITY error naming principal ("" for the
// store's bound) and the limit.
func wantOverflow(t *testing.T, rec store.Record, principal string, limit int64, status store.Status) {
	t.Helper()
	var body struct {
		Code      string       `json:"code"`
		Message   string       `json:"message"`
		Principal string       `json:"principal"`
		Resource  string       `json:"resource"`
		Limit     int64        `json:"limit"`
		Status    store.Status `json:"outcome_status"`
	}
	if err := json.Unmarshal(rec.Error, &body); err != nil || rec.Status != store.StatusFailed || rec.Data != nil ||
		body.Code != store.CodeCapacity || body.Principal != principal || body.Resource != store.ResourceBytes ||
		body.Limit != limit || body.Status != status || body.Message == "" {
		t.Fatalf("record %+v (error %s), want failed without data, IDEMPOTENCY_CAPACITY of %q bytes at %d for a %s outcome",
			rec, rec.Error, principal, limit, status)
	}
}

// testByteQuota checks Execution.ByteQuota and Result.ByteQuota: a
// reservation whose record and headroom do not fit in the principal's
// quota is refused (a *store.QuotaError with Bytes, matching ErrCapacity)
// and reserves nothing; an outcome that does not fit is recorded as a
// bounded failure and replayed as such; a resolution that does not fit is
// refused; records already stored keep their data; other principals are
// not affected; Stats accounts every record's RecordSize.
func testByteQuota(t *testing.T, newStore Factory) {
	s := newStore(t, 100)
	ctx := context.Background()
	ex0 := withBytes(0, 0)
	base := sizeOf(key("b-0"), "fp", ex0)
	quota := 3*base + 200 // three bare records and 200 bytes of outcomes
	ex0.ByteQuota = quota
	mustReserve(t, s, key("b-0"), "fp", ex0, store.Reserved)
	res0 := completed(ex0.ID, data(100))
	res0.ByteQuota = quota
	if rec := mustComplete(t, s, key("b-0"), "fp", res0); rec.Status != store.StatusCompleted || string(rec.Data) != data(100) {
		t.Fatalf("an outcome within the quota: %+v, want it recorded whole", rec)
	}
	wantBytes(t, s, key("b-0"))
	ex1 := withBytes(quota, 0)
	mustReserve(t, s, key("b-1"), "fp", ex1, store.Reserved)

	// Held: two records and 100 bytes of data. A third with room for a
	// 200-byte result does not fit.
	_, err := s.Reserve(ctx, key("b-2"), "fp", withBytes(quota, 200))
	wantErr(t, "reserve over the byte quota", err, store.ErrCapacity)
	var qe *store.QuotaError
	if !errors.As(err, &qe) || qe.Principal != "alice" || qe.Bytes != quota || qe.Resource() != store.ResourceBytes ||
		store.CodeOf(err) != store.CodeCapacity {
		t.Fatalf("reserve over the byte quota: err = %#v, want a *store.QuotaError of alice at %d bytes", err, quota)
	}
	if f := qe.Fields(); f["principal"] != "alice" || f["resource"] != "bytes" {
		t.Fatalf("envelope fields %v, want the principal and the resource", f)
	}
	if _, err := s.Lookup(ctx, key("b-2")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused reservation left a record: %v", err)
	}
	// Without the headroom it fits.
	ex2 := withBytes(quota, 0)
	mustReserve(t, s, key("b-2"), "fp", ex2, store.Reserved)

	// 150 bytes more do not fit in what is left (100): the outcome is
	// recorded as a bounded failure, which a retry replays.
	res1 := completed(ex1.ID, data(150))
	res1.ByteQuota = quota
	rec1 := mustComplete(t, s, key("b-1"), "fp", res1)
	wantOverflow(t, rec1, "alice", quota, store.StatusCompleted)
	if got := mustReserve(t, s, key("b-1"), "fp", newExec("t"), store.Replay); string(got.Error) != string(rec1.Error) {
		t.Fatalf("the replay of the bounded failure: %s, want %s", got.Error, rec1.Error)
	}
	// The record stored before keeps its data.
	if got := mustLookup(t, s, key("b-0")); got.Status != store.StatusCompleted || string(got.Data) != data(100) {
		t.Fatalf("the record stored before the quota filled: %+v", got)
	}
	// An operator's resolution that does not fit is refused, and the
	// record stays as it was.
	big := completed(ex2.ID, data(400))
	big.ByteQuota = quota
	_, err = s.Resolve(ctx, ex2.ID, store.Resolution{Result: big, AllowRunning: true})
	if !errors.As(err, &qe) || qe.Bytes != quota || !errors.Is(err, store.ErrCapacity) {
		t.Fatalf("a resolution over the byte quota: %v, want a *store.QuotaError at %d bytes", err, quota)
	}
	if got := mustLookup(t, s, key("b-2")); got.Status != store.StatusRunning {
		t.Fatalf("the refused resolution changed the record: %+v", got)
	}
	// Another principal under the same quota is not affected.
	bob := store.Key{Principal: "bob", Session: "s1", RequestID: "b-0"}
	exBob := withBytes(quota, 200)
	mustReserve(t, s, bob, "fp", exBob, store.Reserved)
	resBob := completed(exBob.ID, data(200))
	resBob.ByteQuota = quota
	if rec := mustComplete(t, s, bob, "fp", resBob); rec.Status != store.StatusCompleted {
		t.Fatalf("bob's outcome within his quota: %+v", rec)
	}
	wantBytes(t, s, key("b-0"), key("b-1"), key("b-2"), bob)
	// Releasing a record frees its bytes.
	if _, err := s.Release(ctx, ex2.ID, true); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantBytes(t, s, key("b-0"), key("b-1"), bob)
}

// testStoreBytes checks the store's own bound on bytes (MaxBytesSetter):
// a reservation that does not fit is refused with a *store.CapacityError
// naming no principal, and an outcome that does not fit is recorded as a
// bounded failure.
func testStoreBytes(t *testing.T, newStore Factory) {
	s := newStore(t, 100)
	setter, ok := s.(MaxBytesSetter)
	if !ok {
		t.Skip("the store's bound on bytes is not set directly")
	}
	ctx := context.Background()
	ex0 := newExec("t")
	base := sizeOf(key("sb-0"), "fp", ex0)
	limit := 2*base + 50
	setter.SetMaxBytes(limit)
	mustReserve(t, s, key("sb-0"), "fp", ex0, store.Reserved)
	mustComplete(t, s, key("sb-0"), "fp", completed(ex0.ID, data(20)))
	ex1 := newExec("t")
	mustReserve(t, s, key("sb-1"), "fp", ex1, store.Reserved)
	_, err := s.Reserve(ctx, key("sb-2"), "fp", newExec("t"))
	var ce *store.CapacityError
	if !errors.As(err, &ce) || ce.Resource != store.ResourceBytes || ce.Limit != limit || !errors.Is(err, store.ErrCapacity) {
		t.Fatalf("reserve over the store's bytes: %v, want a *store.CapacityError of %d bytes", err, limit)
	}
	if _, ok := ce.Fields()["principal"]; ok {
		t.Fatalf("the store's bound names a principal: %v", ce.Fields())
	}
	wantOverflow(t, mustComplete(t, s, key("sb-1"), "fp", completed(ex1.ID, data(100))), "", limit, store.StatusCompleted)
	st, err := s.Stats(ctx)
	if err != nil || st.MaxBytes != limit {
		t.Fatalf("Stats = %+v, %v; want MaxBytes %d", st, err, limit)
	}
	wantBytes(t, s, key("sb-0"), key("sb-1"))
}
