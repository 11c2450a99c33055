package embed

import (
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
)

// The backends a runtime may be given, checked here, where engine and
// the packages that provide them meet (neither imports the other).
var (
	_ engine.Backend = (*store.Memory)(nil)
	_ engine.Backend = (*cluster.Store)(nil)
	_ engine.Backend = (*postgres.Fleet)(nil)
	_ engine.Backend = (*postgres.Store)(nil)
)
