// Package store defines what Carmy records about a tool call and the seam
// through which it is recorded.
//
// A call with a request_id has an identity, Key (principal, session,
// request_id). Before its tool runs, the runtime reserves that identity with
// Store.Reserve; afterwards it records the outcome with Store.Complete. Every
// later call of the same identity is answered from the Record: a replay when
// it is finished and the fingerprint matches, a conflict when the fingerprint
// differs, and an uncertain answer while it is running or interrupted.
//
// The package holds the vocabulary every layer shares (Key, Record, Status,
// the Fingerprint function and the sentinel errors), the Store interface, and
// Memory, the default bounded in-memory implementation. Package storetest is
// the conformance suite every implementation passes.
//
// This package imports only the standard library (and its own jcs
// canonicaliser), so any back end may implement Store without pulling in the
// rest of Carmy.
package store
