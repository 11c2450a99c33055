package postgres_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
)

// BenchmarkLedgerCost measures what the audit ledger costs a fleet's new
// calls (Reserve, then Complete: two entries a call): one or two stores
// sharing a schema (two fleet nodes, the callers split between them), by
// 16 and 64 callers, with the ledger and without it (Config.NoLedger).
// A deciding transaction queues its drafts, and the chainer takes the head
// row (ledger.go, ledger_chain.go).
func BenchmarkLedgerCost(b *testing.B) {
	for _, nodes := range []int{1, 2} {
		for _, workers := range []int{16, 64} {
			for _, ledger := range []bool{false, true} {
				b.Run(fmt.Sprintf("nodes=%d/workers=%d/ledger=%v", nodes, workers, ledger), func(b *testing.B) {
					schema := freshSchema()
					dsn := needServer(b).DSN("postgres") + " pool_max_conns=" + strconv.Itoa(max(workers/nodes, 2))
					var stores []*postgres.Store
					for n := range nodes {
						stores = append(stores, openStore(b, dsn, postgres.Config{Schema: schema, Capacity: math.MaxInt32,
							NodeID: "n" + strconv.Itoa(n), NoLedger: !ledger}))
					}
					benchCalls(b, stores[0], workers, func(ctx context.Context, _ store.Store, round string, i int) error {
						return reserveComplete(ctx, stores[i%nodes], round, i)
					})
				})
			}
		}
	}
}
