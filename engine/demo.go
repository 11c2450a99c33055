package engine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"
)

// DemoTools returns the demo tools of docs/cli.md#--dev: echo, lookup, create_order, sleep
// and fail.
//
// create_order's order_id is the call's fencing token: unique cluster-wide
// and growing in the order reservations commit, so two orders never share
// a number, whichever node ran them and across restarts — a repeated
// order_id is always a replay, never a second order. A call without a
// request_id is not reserved and has no token; its order gets a random
// number (at least 2^52, above any token a demo reaches).
func DemoTools() []ToolSpec {
	return []ToolSpec{
		{
			Name:        "echo",
			Description: "Returns its arguments.",
			InputSchema: json.RawMessage(`{"type":"object"}`),
			Annotations: json.RawMessage(`{"readOnlyHint":true,"openWorldHint":false}`),
			Func: func(_ context.Context, c Call) (any, error) {
				return c.Arguments, nil
			},
		},
		{
			Name:        "lookup",
			Description: "Returns its arguments without recording the call (effects read_only: nothing is reserved, a retry runs it again).",
			InputSchema: json.RawMessage(`{"type":"object"}`),
			Annotations: json.RawMessage(`{"readOnlyHint":true,"openWorldHint":false}`),
			Effects:     EffectsReadOnly,
			Func: func(_ context.Context, c Call) (any, error) {
				return c.Arguments, nil
			},
		},
		{
			Name:        "create_order",
			Description: "Creates a (pretend) order and returns its number.",
			InputSchema: json.RawMessage(`{"type":"object","required":["sku"],"properties":{"sku":{"type":"string","minLength":1}}}`),
			Annotations: json.RawMessage(`{"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":false}`),
			Func: func(_ context.Context, c Call) (any, error) {
				var in struct {
					SKU string `json:"sku"`
				}
				if err := json.Unmarshal(c.Arguments, &in); err != nil {
					return nil, err
				}
				return map[string]any{"order_id": orderID(c), "sku": in.SKU}, nil
			},
		},
		{
			Name:        "sleep",
			Description: "Sleeps for ms milliseconds; honours cancellation and timeouts.",
			InputSchema: json.RawMessage(`{"type":"object","required":["ms"],"properties":{"ms":{"type":"integer","minimum":0}}}`),
			Annotations: json.RawMessage(`{"readOnlyHint":true,"openWorldHint":false}`),
			Timeout:     time.Minute,
			Func: func(ctx context.Context, c Call) (any, error) {
				var in struct {
					MS int64 `json:"ms"`
				}
				if err := json.Unmarshal(c.Arguments, &in); err != nil {
					return nil, err
				}
				t := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
				defer t.Stop()
				select {
				case <-t.C:
					return map[string]any{"slept_ms": in.MS}, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			},
		},
		{
			Name:        "fail",
			Description: "Fails with the given message (status failed, code TOOL_ERROR).",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}}}`),
			Annotations: json.RawMessage(`{"readOnlyHint":true,"openWorldHint":false}`),
			Func: func(_ context.Context, c Call) (any, error) {
				var in struct {
					Message string `json:"message"`
				}
				if err := json.Unmarshal(c.Arguments, &in); err != nil {
					return nil, err
				}
				if in.Message == "" {
					in.Message = "the fail tool failed, as asked"
				}
				return nil, &ToolError{Code: CodeToolError, Message: in.Message}
			},
		},
	}
}

// AddDemoTools registers the demo tools.
func (r *Runtime) AddDemoTools() error {
	for _, spec := range DemoTools() {
		if err := r.AddTool(spec); err != nil {
			return fmt.Errorf("demo tools: %w", err)
		}
	}
	return nil
}

// orderID numbers create_order's order: the fencing token, or a random
// number in [2^52, 2^53) for a call that has none (JSON clients read both
// exactly).
func orderID(c Call) uint64 {
	if c.FencingToken > 0 {
		return c.FencingToken
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return 1<<52 | binary.BigEndian.Uint64(b[:])&(1<<52-1)
}
