package mcp

import (
	"context"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// detRuntime keeps no records: the reconcile tools and tasks find none.

func (detRuntime) Execution(context.Context, engine.Caller, string) (store.Record, error) {
	return store.Record{}, store.ErrNotFound
}

func (detRuntime) Lookup(context.Context, engine.Caller, string, string) (store.Record, error) {
	return store.Record{}, store.ErrNotFound
}

func (detRuntime) List(context.Context, engine.Caller, engine.ListRequest) (store.Page, error) {
	return store.Page{}, nil
}

func (detRuntime) Cancel(context.Context, engine.Caller, string) (store.Record, error) {
	return store.Record{}, store.ErrNotFound
}

func (detRuntime) Resolve(context.Context, engine.Caller, string, engine.Resolution) (store.Record, error) {
	return store.Record{}, store.ErrNotFound
}
