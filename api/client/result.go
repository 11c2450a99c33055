package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Status is an execution's status (docs/api.md#concepts).
type Status string

// Statuses of docs/api.md#concepts. A call's answer is always finished (completed,
// failed, timed_out or cancelled); an execution record may also be running
// or interrupted.
const (
	StatusRunning     Status = "running"
	StatusInterrupted Status = "interrupted"
	StatusCompleted   Status = "completed"
	StatusFailed      Status = "failed"
	StatusTimedOut    Status = "timed_out"
	StatusCancelled   Status = "cancelled"
	// StatusReleased is never a record's status: it is APIError.ExecStatus
	// of the INVALID_STATE answered to a call whose execution was
	// released (Resolve with ResolveReleased) while its tool ran.
	StatusReleased Status = "released"
)

// Finished reports whether s is a recorded outcome, replayed to retries.
func (s Status) Finished() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusTimedOut, StatusCancelled:
		return true
	}
	return false
}

// ToolError is the error object of an outcome other than completed:
// {"code":…,"message":…} with a code such as TOOL_ERROR, TIMEOUT,
// CANCELLED or the tool's own. As returned by Result.Err it also says which
// execution it belongs to.
type ToolError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Details is the whole error object as recorded, members beyond code
	// and message included (an HTTP tool's "status", for instance).
	Details json.RawMessage `json:"-"`

	// Status, Tool and ExecutionID are filled by Result.Err.
	Status      Status `json:"-"`
	Tool        string `json:"-"`
	ExecutionID string `json:"-"`
}

func (e *ToolError) Error() string {
	msg := "tool"
	if e.Tool != "" {
		msg += " " + e.Tool
	}
	if e.Status != "" {
		msg += " " + string(e.Status)
	} else {
		msg += " failed"
	}
	if e.ExecutionID != "" {
		msg += " (execution " + e.ExecutionID + ")"
	}
	return msg + ": " + e.Code + ": " + e.Message
}

// UnmarshalJSON keeps the whole object in Details.
func (e *ToolError) UnmarshalJSON(b []byte) error {
	var v struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	e.Code, e.Message = v.Code, v.Message
	e.Details = append(json.RawMessage(nil), b...)
	return nil
}

// Result is a call's answer (docs/api.md#calling-a-tool-post-v1toolscall): the outcome of the execution that
// ran now, or the recorded one replayed. An outcome other than completed
// (failed, timed_out, cancelled) is a Result, not a Go error: the tool ran
// (or was stopped) and that is recorded for good; Err returns it as an
// error.
type Result struct {
	ExecutionID string
	RequestID   string
	SessionID   string
	Tool        string
	Status      Status
	// Data is the tool's result when Status is completed (JSON null when
	// it returned nothing); nil otherwise.
	Data json.RawMessage
	// Error is set when Status is not completed.
	Error *ToolError
	// Replayed is true when this is the recorded outcome of an earlier
	// execution (the body's "replayed" or the Idempotent-Replayed header):
	// the tool did not run for this call.
	Replayed bool
	// Resolved is true when the outcome was settled by Resolve.
	Resolved   bool
	StartedAt  time.Time
	FinishedAt time.Time
	// Raw is the answer's body and Header its HTTP header, as the node
	// sent them: for a caller that checks the answer itself or passes it
	// on (Replayed above is the body's "replayed" or the header's).
	Raw    json.RawMessage
	Header http.Header
}

// Err returns nil when the call completed, else a *ToolError naming the
// status, the tool and the execution.
func (r *Result) Err() error {
	if r.Status == StatusCompleted {
		return nil
	}
	te := ToolError{Code: string(r.Status), Message: "no error recorded"}
	if r.Error != nil {
		te = *r.Error
	}
	te.Status, te.Tool, te.ExecutionID = r.Status, r.Tool, r.ExecutionID
	return &te
}

// Decode unmarshals Data into v; it returns Err's error when the call did
// not complete.
func (r *Result) Decode(v any) error {
	if err := r.Err(); err != nil {
		return err
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		return fmt.Errorf("carmy: decoding the data of execution %s: %w", r.ExecutionID, err)
	}
	return nil
}

// Execution is an execution record (docs/api.md#executions): the fields of a Result
// plus those only GET /v1/executions shows.
type Execution struct {
	ExecutionID string
	RequestID   string
	SessionID   string
	Tool        string
	// Status may be running or interrupted besides the finished ones.
	Status Status
	Data   json.RawMessage
	Error  *ToolError
	// Resolved is true when Resolve settled the outcome, and ResolvedBy
	// says by whom: the principal that called Resolve, or "probe" for the
	// tool's reconcile probe (docs/config.md#reconcile-probes).
	Resolved   bool
	ResolvedBy string
	// Released is true in Resolve's answer to a release: the reservation
	// is gone and the next call of the identity runs the tool.
	Released    bool
	Fingerprint string
	NodeID      string
	Principal   string
	StartedAt   time.Time
	// FinishedAt is zero while the execution is running or interrupted.
	FinishedAt time.Time
}

// record is the JSON of an execution as the server writes it (api/views.go).
type record struct {
	ExecutionID string          `json:"execution_id"`
	RequestID   string          `json:"request_id"`
	SessionID   string          `json:"session_id"`
	Tool        string          `json:"tool"`
	Status      Status          `json:"status"`
	Data        json.RawMessage `json:"data"`
	Error       *ToolError      `json:"error"`
	Replayed    bool            `json:"replayed"`
	Resolved    bool            `json:"resolved"`
	ResolvedBy  string          `json:"resolved_by"`
	Released    bool            `json:"released"`
	StartedAt   string          `json:"started_at"`
	FinishedAt  string          `json:"finished_at"`
	Fingerprint string          `json:"fingerprint"`
	NodeID      string          `json:"node_id"`
	Principal   string          `json:"principal"`

	// started and finished are parsed by validate.
	started, finished time.Time
}

// validate checks the members every record has and parses the
// timestamps (RFC 3339; finished_at may be absent). decodeAnswer calls it.
func (r *record) validate() error {
	switch {
	case r.ExecutionID == "":
		return errors.New("no execution_id")
	case r.Status == "":
		return errors.New("no status")
	}
	parse := func(name, s string) (time.Time, error) {
		if s == "" {
			return time.Time{}, nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s: %w", name, err)
		}
		return t, nil
	}
	var err error
	if r.started, err = parse("started_at", r.StartedAt); err != nil {
		return err
	}
	r.finished, err = parse("finished_at", r.FinishedAt)
	return err
}

func (r *record) result() *Result {
	return &Result{
		ExecutionID: r.ExecutionID, RequestID: r.RequestID, SessionID: r.SessionID, Tool: r.Tool,
		Status: r.Status, Data: r.Data, Error: r.Error, Replayed: r.Replayed, Resolved: r.Resolved,
		StartedAt: r.started, FinishedAt: r.finished,
	}
}

func (r *record) execution() *Execution {
	return &Execution{
		ExecutionID: r.ExecutionID, RequestID: r.RequestID, SessionID: r.SessionID, Tool: r.Tool,
		Status: r.Status, Data: r.Data, Error: r.Error, Resolved: r.Resolved, ResolvedBy: r.ResolvedBy, Released: r.Released,
		Fingerprint: r.Fingerprint, NodeID: r.NodeID, Principal: r.Principal,
		StartedAt: r.started, FinishedAt: r.finished,
	}
}
