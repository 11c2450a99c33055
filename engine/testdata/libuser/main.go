// Command libuser is a Go program that uses Carmy's runtime as a library,
// with the in-memory store and no HTTP. TestLayout lists what it links.
package main

import (
	"context"
	"fmt"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

func main() {
	rt := engine.New()
	rt.IdempotencyStore(store.NewMemory(100))
	rt.Tool("echo", func(_ context.Context, c engine.Call) (any, error) { return c.Arguments, nil })
	resp, err := rt.Call(context.Background(), engine.Caller{Principal: "p"}, engine.Request{Tool: "echo", RequestID: "r1"})
	fmt.Println(resp.Record.Status, err)
}
