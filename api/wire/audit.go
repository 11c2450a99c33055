package wire

// AuditHead is the answer of GET /v1/audit/head: the seq and hash of the
// last entry of the node's audit ledger (docs/audit.md).
type AuditHead struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}
