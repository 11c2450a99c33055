package postgres

import (
	"context"

	"github.com/carmyhq/carmy/store"
)

// What a runtime asks of its backend beside the store (engine.Backend;
// the root package checks Store and Fleet against it at compile time).
// A Store is a store alone: processes sharing it do not know of each
// other, so it knows no runner gone and delivers no cancel; a Fleet
// (fleet.go) does both.

// PeekFinished implements store.Peeker: never, as a Store holds no
// records locally and cannot answer without a round trip; every call goes
// through Reserve.
func (s *Store) PeekFinished(store.Key) (store.Record, bool) { return store.Record{}, false }

// Ready reports that the store can serve: always once open. A database
// that cannot be reached shows in the answers (store.ErrUnavailable).
func (s *Store) Ready(context.Context) error { return nil }

// RunnerGone reports whether another process's runner is known to be
// gone: never, as a Store does not know the others (a Fleet does).
func (s *Store) RunnerGone(string) bool { return false }

// OnCancel installs nothing: a Store delivers no cancel asked of another
// process (a Fleet does).
func (s *Store) OnCancel(func(executionID string)) {}

// PeekFinished implements store.Peeker: never, as a fleet node holds no
// records locally; every call goes through Reserve.
func (f *Fleet) PeekFinished(store.Key) (store.Record, bool) { return store.Record{}, false }
