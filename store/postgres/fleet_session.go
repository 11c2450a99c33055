package postgres

import (
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// idleInTxParam is the server setting that ends a session left idle
// inside a transaction.
const idleInTxParam = "idle_in_transaction_session_timeout"

// boundIdleTransactions makes the server end any session of pc that
// stays idle inside a transaction for longer than lease (unless the
// connection string sets idle_in_transaction_session_timeout itself).
//
// A fleet node's writes are transactions of a few round trips that hold
// row locks — the meta row, lease rows, the records being written —
// until COMMIT. A node cut off the network between two of those round
// trips leaves its session open on the server, which, with no TCP reset,
// would keep those locks for as long as the kernel's keepalive takes
// (hours): every other node's writes wait on the meta row and the sweep
// that should mark the lost node's executions interrupted waits on their
// rows. With the bound, the server rolls such a transaction back once the
// node has been silent for its lease, the time after which the fleet
// calls it dead anyway; nothing it had not committed was applied.
func boundIdleTransactions(pc *pgxpool.Config, lease time.Duration) {
	if pc.ConnConfig.RuntimeParams == nil {
		pc.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, set := pc.ConnConfig.RuntimeParams[idleInTxParam]; set {
		return
	}
	pc.ConnConfig.RuntimeParams[idleInTxParam] = strconv.FormatInt(max(lease.Milliseconds(), 1), 10)
}
