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
	v.Replayed = &resp.Replayed
	if resp.Passthrough {
		v.Recorded = new(bool)
	}
	if resp.Record.Resolved {
		v.Resolved = &resp.Record.Resolved
		v.ResolvedBy = resp.Record.ResolvedBy
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
