package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
)

// The reconcile probe of an upstream (docs/config.md#reconcile-probes; Config.ReconcileTool):
// an upstream tool asked whether an interrupted execution of any of the
// server's tools had its effect. It is called with
//
//	{"tool": <the upstream tool's name>, "idempotency_key", "execution_id",
//	 "request_id", "fencing_token"}
//
// and answers in structuredContent {"found": true, "data": …} (the effect
// happened; data is its outcome) or {"found": false} (it never did).
// Anything else, an isError result or no answer is undecided.
//
// It is not given the call's "arguments" (docs/config.md#tools). Carmy keeps no call's arguments (a
// record holds their fingerprint only, and the node that had them may be
// the one that died), so the probe cannot be given them: it identifies
// the call by its idempotency key, which the upstream was sent with it.

// reconcileFunc returns the probe of the upstream tool name.
func (u *Upstream) reconcileFunc(name string) engine.ProbeFunc {
	return func(ctx context.Context, c engine.ProbeCall) (engine.ProbeAnswer, error) {
		cn := u.current()
		if cn == nil {
			return engine.ProbeAnswer{}, errors.New("the upstream MCP server is not connected")
		}
		args, err := json.Marshal(map[string]any{
			"tool": name, "idempotency_key": c.IdempotencyKey, "execution_id": c.ExecutionID,
			"request_id": c.RequestID, "fencing_token": c.FencingToken,
		})
		if err != nil {
			return engine.ProbeAnswer{}, err
		}
		st := &callState{call: engine.Call{Tool: c.Tool, ExecutionID: c.ExecutionID, RequestID: c.RequestID,
			IdempotencyKey: c.IdempotencyKey, FencingToken: c.FencingToken}}
		defer st.done.Store(true)
		res, err := cn.cs.CallTool(withCall(ctx, st), &mcp.CallToolParams{Name: u.cfg.ReconcileTool, Arguments: json.RawMessage(args)})
		switch {
		case st.tooLarge.Load():
			return engine.ProbeAnswer{}, fmt.Errorf("the probe's answer is larger than %d bytes", u.maxAnswer)
		case err != nil:
			return engine.ProbeAnswer{}, fmt.Errorf("the probe got no answer: %s", u.redactor.Redact(err.Error()))
		case res.IsError:
			return engine.ProbeAnswer{}, fmt.Errorf("the probe failed: %s", u.errorText(res.Content))
		}
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return engine.ProbeAnswer{}, err
		}
		var ans struct {
			Found *bool           `json:"found"`
			Data  json.RawMessage `json:"data"`
		}
		if json.Unmarshal(raw, &ans) != nil || ans.Found == nil {
			return engine.ProbeAnswer{}, errors.New(`the probe did not answer {"found": true|false}`)
		}
		if !*ans.Found {
			return engine.ProbeAnswer{Found: false}, nil
		}
		data, err := u.redactValue(ans.Data)
		if err != nil {
			return engine.ProbeAnswer{}, err
		}
		b, err := json.Marshal(data)
		if err != nil {
			return engine.ProbeAnswer{}, err
		}
		return engine.ProbeAnswer{Found: true, Data: b}, nil
	}
}
