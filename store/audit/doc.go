// Package audit defines the entries of Carmy's audit ledger, the hash
// chain that links them, and the offline verifier of an export.
//
// The ledger is an append-only list of decisions: every decision about an
// execution (reserved, a final status, interrupted, resolved, released)
// and every admin action (a member joined or removed, a leadership
// transfer) appends one Entry. Entries are numbered from 1 (Seq, with no
// gap) and chained: each names the Hash of the one before it (PrevHash;
// Genesis before the first), and its own Hash is
//
//	hex(SHA-256(prev_hash ‖ canonical))
//
// where prev_hash is the 64 ASCII hex digits of PrevHash and canonical is
// the RFC 8785 (JCS) canonical JSON of the entry's object without its
// "hash" member (Canonical). Every member is always present, "" when
// empty, so an auditor can rebuild the bytes with any JCS implementation
// from the exported line alone (docs/audit.md).
//
// An exported line is the canonical JSON of the whole entry, "hash"
// included (Line), so any change to any byte of a line is caught: either
// the line is no longer canonical, or its hash no longer matches, or the
// next entry's prev_hash does not.
//
// Entries older than the retention are pruned; a Checkpoint {seq, hash}
// of the last pruned entry stays, and an export that does not start at
// the first entry begins with that checkpoint's line, which the Verifier
// takes as its anchor.
//
// Who writes the ledger is the back end's business (the Raft state
// machine writes it as it applies the log: package fsm). This package
// imports only the standard library and Carmy's own JSON scanner.
package audit
