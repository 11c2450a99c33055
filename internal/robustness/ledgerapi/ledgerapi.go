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
}

// Entry is one execution of the tool body.
type Entry struct {
	Seq            uint64 `json:"seq"`
	IdempotencyKey string `json:"idempotency_key"`
	RequestID      string `json:"request_id"`
	ExecutionID    string `json:"execution_id"`
	FencingToken   string `json:"fencing_token"`
	Value          string `json:"value"`
}

// Result is what the tool answers: its data in a completed result.
type Result struct {
	Seq         uint64 `json:"seq"`
	ExecutionID string `json:"execution_id"`
	Value       string `json:"value"`
}
