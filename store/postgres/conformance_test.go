package postgres_test

import (
	"testing"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
	"github.com/carmyhq/carmy/store/storetest"
)

// TestConformance runs the suite every store passes, each case on a store
// in a schema of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	needServer(t)
	storetest.Run(t, func(t *testing.T, capacity int) store.Store {
		return newStore(t, postgres.Config{Capacity: capacity})
	})
}
