package api

import (
	"encoding/json"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// timeFormat renders times as docs/api.md#calling-a-tool-post-v1toolscall shows them: UTC, milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// recordView is the JSON of an execution (docs/api.md#calling-a-tool-post-v1toolscall, docs/api.md#executions).
type recordView struct {
	ExecutionID string          `json:"execution_id"`
	RequestID   string          `json:"request_id,omitempty"`
	SessionID   string          `json:"session_id"`
	Tool        string          `json:"tool"`
	Status      store.Status    `json:"status"`
	Data        json.RawMessage `json:"data,omitempty"`
	Error       json.RawMessage `json:"error,omitempty"`
	Replayed    *bool           `json:"replayed,omitempty"`
	// Recorded is false, and set, only for a call of a read-only tool,
	// which nothing reserved or recorded (docs/policy.md).
	Recorded    *bool  `json:"recorded,omitempty"`
	Resolved    *bool  `json:"resolved,omitempty"`
	ResolvedBy  string `json:"resolved_by,omitempty"`
	Released    bool   `json:"released,omitempty"`
	StartedAt   string `json:"started_at"`
	FinishedAt  string `json:"finished_at,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	NodeID      string `json:"node_id,omitempty"`
	Principal   string `json:"principal,omitempty"`
	// Approval is a gated execution's gate and decision (approvalJSON).
	Approval json.RawMessage `json:"approval,omitempty"`
}

// approvalView is the "approval" member of a gated execution: who may
// decide, until when, the call's arguments, and the decision once taken.
type approvalView struct {
	Approvers []string        `json:"approvers"`
	ExpiresAt string          `json:"expires_at"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Decision  *decisionView   `json:"decision,omitempty"`
}

type decisionView struct {
	Status store.Status `json:"status"`
	By     string       `json:"by,omitempty"`
	Reason string       `json:"reason,omitempty"`
	At     string       `json:"at"`
}

// approvalJSON is r's approval member (nil for a record without a gate).
func approvalJSON(r store.Record) json.RawMessage {
	g := r.Approval
	if g == nil {
		return nil
	}
	v := approvalView{Approvers: g.Approvers, ExpiresAt: g.ExpiresAt.UTC().Format(timeFormat), Arguments: g.Arguments}
	if v.Approvers == nil {
		v.Approvers = []string{}
	}
	if d := r.Decision; d != nil {
		v.Decision = &decisionView{Status: d.Status, By: d.By, Reason: d.Reason, At: d.At.UTC().Format(timeFormat)}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

func baseView(r store.Record) recordView {
	v := recordView{
		ExecutionID: r.ExecutionID,
		RequestID:   r.Key.RequestID,
		SessionID:   r.Key.Session,
		Tool:        r.Tool,
		Status:      r.Status,
		Error:       r.Error,
		StartedAt:   r.StartedAt.UTC().Format(timeFormat),
	}
	if r.Status == store.StatusCompleted {
		v.Data = r.Data
		if len(v.Data) == 0 {
			v.Data = json.RawMessage("null")
		}
	}
	if !r.FinishedAt.IsZero() {
		v.FinishedAt = r.FinishedAt.UTC().Format(timeFormat)
	}
	return v
}

// callView is the answer to POST /v1/tools/call.
func callView(resp engine.Response) recordView {
	v := baseView(resp.Record)
	// Pointers to copies: a pointer into resp would move all of it to the
	// heap on every call.
	replayed := resp.Replayed
	v.Replayed = &replayed
	if resp.Passthrough {
		v.Recorded = new(bool)
	}
	if resp.Record.Resolved {
		v.Resolved = new(bool)
		*v.Resolved = true
		v.ResolvedBy = resp.Record.ResolvedBy
	}
	if resp.Awaiting {
		v.Approval = approvalJSON(resp.Record)
	}
	return v
}

// resolvedView is the answer to a resolve (POST
// /v1/executions/{id}/resolve, and carmy.resolve at /mcp): the execution
// as it now stands; for a release (released), the record it removed,
// marked "released": true.
func resolvedView(r store.Record, released bool) recordView {
	v := executionView(r)
	v.Released = released
	return v
}

// executionView is a record as GET /v1/executions shows it.
func executionView(r store.Record) recordView {
	v := baseView(r)
	v.Resolved = &r.Resolved
	v.ResolvedBy = r.ResolvedBy
	v.Fingerprint = r.Fingerprint
	v.NodeID = r.NodeID
	v.Principal = r.Key.Principal
	v.Approval = approvalJSON(r)
	return v
}

type listView struct {
	Executions []recordView `json:"executions"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

type toolView struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	TimeoutMS   int64           `json:"timeout_ms"`
}

type toolsView struct {
	Tools []toolView `json:"tools"`
}

func newToolView(t engine.ToolInfo) toolView {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	return toolView{Name: t.Name, Description: t.Description, InputSchema: schema, TimeoutMS: int64(t.Timeout / time.Millisecond)}
}
