package store_test

import (
	"testing"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, capacity int) store.Store {
		return store.NewMemory(capacity)
	})
}

func TestMemoryDefaultCapacity(t *testing.T) {
	st, err := store.NewMemory(0).Stats(t.Context())
	if err != nil || st.Capacity != 10000 {
		t.Fatalf("Stats = %+v, %v; want capacity 10000", st, err)
	}
}

func TestMemoryApprovalConformance(t *testing.T) {
	storetest.RunApproval(t, func(t *testing.T, capacity int) store.Store {
		return store.NewMemory(capacity)
	})
}
