// Package ledgerapi holds the types the robustness ledger and its harness
// exchange.
package ledgerapi

// Args are the arguments of the ledger tool.
type Args struct {
	// Value distinguishes argument sets: calls of one identity with
	// different values conflict.
	Value string `json:"value"`
	// DelayMS is how long the tool takes after recording the execution.
	DelayMS int `json:"delay_ms,omitempty"`
	// Lose makes the ledger read the first request of the call's
	// Idempotency-Key, record nothing and cut the connection: a lost
	// answer whose effect never happened (interrupted, then released by
	// the reconcile probe). Later requests of the key are recorded.
	Lose bool `json:"lose,omitempty"`
}

// Entry is one execution of the tool body.
type Entry struct {
	Seq            uint64 `json:"seq"`
	IdempotencyKey string `json:"idempotency_key"`
	RequestID      string `json:"request_id"`
	ExecutionID    string `json:"execution_id"`
	FencingToken   string `json:"fencing_token"`
	Value          string `json:"value"`
	// Resent is true when the ledger had cut a request of this very
	// execution before (Args.Lose): the same request delivered again.
	Resent bool `json:"resent,omitempty"`
}

// Result is what the tool answers: its data in a completed result.
type Result struct {
	Seq         uint64 `json:"seq"`
	ExecutionID string `json:"execution_id"`
	Value       string `json:"value"`
}

// Probe is one reconcile probe the ledger answered (GET /by-key/{key}):
// which execution Carmy asked about, and what the ledger said.
type Probe struct {
	// Entries is how many entries the ledger held when it answered: the
	// entries with a Seq up to it were there, later ones came after.
	Entries        uint64 `json:"entries"`
	IdempotencyKey string `json:"idempotency_key"`
	RequestID      string `json:"request_id"`
	ExecutionID    string `json:"execution_id"`
	FencingToken   string `json:"fencing_token"`
	// Found is true when the ledger answered 200 with the entry of
	// IdempotencyKey (its Result), false when it answered 404.
	Found bool `json:"found"`
	// Seq is the entry answered when Found.
	Seq uint64 `json:"seq,omitempty"`
}
