package carmy_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/store"
)

// TestFacadeOptionsReachTheRuntime checks that the facade's options and
// tool options are the runtime's: what they set is what the runtime uses.
func TestFacadeOptionsReachTheRuntime(t *testing.T) {
	app := newApp(t, carmy.WithNodeID("n7"), carmy.WithStoreTimeout(3*time.Second), carmy.WithDrainTimeout(time.Second),
		carmy.WithMaxResultBytes(4096), carmy.WithMaxRunning(9))
	cfg := app.Config()
	if cfg.NodeID != "n7" || cfg.StoreTimeout != 3*time.Second || cfg.DrainTimeout != time.Second ||
		cfg.MaxResultBytes != 4096 || cfg.MaxRunning != 9 {
		t.Fatalf("Config() = %+v", cfg)
	}

	var c counter
	schema := json.RawMessage(`{"type":"object","required":["n"]}`)
	app.Tool("strict", c.fn, carmy.Description("d"), carmy.InputSchema(schema), carmy.Timeout(time.Second), carmy.RequireRequestID())
	if tools := app.Tools(); len(tools) != 1 || tools[0].Description != "d" || tools[0].Timeout != time.Second {
		t.Fatalf("Tools() = %+v", tools)
	}
	caller := carmy.Caller{Principal: "p"}
	_, err := app.Call(t.Context(), caller, carmy.Request{Tool: "strict", Arguments: json.RawMessage(`{"n":1}`)})
	var fe *store.FieldError
	if !errors.As(err, &fe) || fe.Field != "request_id" {
		t.Fatalf("a call without the required request_id: %v", err)
	}
	resp, err := app.Call(t.Context(), caller, carmy.Request{Tool: "strict", RequestID: "r1", Arguments: json.RawMessage(`{"n":1}`)})
	if err != nil || resp.Record.Status != store.StatusCompleted || resp.Record.NodeID != "n7" {
		t.Fatalf("Call = %+v, %v", resp, err)
	}

	var names []string
	for _, spec := range carmy.DemoTools() {
		names = append(names, spec.Name)
	}
	if want := []string{"echo", "lookup", "create_order", "sleep", "fail"}; !slices.Equal(names, want) {
		t.Fatalf("DemoTools() = %v, want %v", names, want)
	}
}
