package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/carmyhq/carmy/store"
)

// ToolFunc is a tool's body. It runs in its own goroutine; ctx is done when
// the tool's timeout passes, the execution is cancelled, or the node shuts
// down, and a well-behaved tool returns promptly then. The returned value is
// encoded as JSON (a json.RawMessage is used as is) and recorded as the
// result's data; a returned error records a failed result (use *ToolError to
// choose its code). A panic is recovered and recorded as failed.
type ToolFunc func(ctx context.Context, call Call) (any, error)

// Call is what a tool sees of the call it serves.
type Call struct {
	Tool      string
	Arguments json.RawMessage
	Metadata  json.RawMessage
	Principal string
	SessionID string
	// RequestID is "" for a call made without idempotency.
	RequestID   string
	ExecutionID string
	// IdempotencyKey is derived from the identity alone: the same for every
	// execution of one identity ("" without a request_id).
	IdempotencyKey string
	// FencingToken grows with every reservation (in a cluster, the log
	// index at which this one committed); 0 without a request_id.
	FencingToken uint64
}

// ToolSpec declares a tool.
type ToolSpec struct {
	Name        string
	Description string
	// InputSchema is a JSON Schema the arguments must satisfy (nil: any
	// object).
	InputSchema json.RawMessage
	// Timeout bounds one execution (DefaultToolTimeout when zero); a call's
	// timeout_ms may lower it, never raise it.
	Timeout time.Duration
	// RequireRequestID refuses calls without a request_id.
	RequireRequestID bool
	// Effects says what repeating the tool does (docs/policy.md):
	// EffectsOnce when empty. An EffectsReadOnly tool's calls are neither
	// reserved nor recorded.
	Effects Effects
	// RetryUncertain, for an EffectsIdempotent tool only, lets a retry of
	// an identity whose execution was left timed_out or interrupted run
	// the tool again, under a new execution and fencing token, whose
	// outcome replaces the old record (store.Execution.RetryUncertain).
	RetryUncertain bool
	// Approval, when set, gates every call of the tool behind a person's
	// decision (docs/policy.md#approval-gates): the call is reserved
	// awaiting_approval and answered so (Response.Awaiting) until an
	// approver approves it (Runtime.Decide), and a call without a
	// request_id is refused.
	Approval *Approval
	// DedupeWindow, when positive, makes a call without a request_id
	// idempotent for that long (docs/mcp.md#calls-without-a-request-id-dedupe_window): it takes the identity
	// (principal, session, DerivedRequestPrefix + the first 32 hex digits
	// of its fingerprint), so the same call again within the window after
	// that identity's reservation committed is replayed (or uncertain while
	// it runs), and after the window runs afresh, replacing the record.
	// RequireRequestID wins: with it, the window never applies.
	DedupeWindow time.Duration
	// Annotations, when set, is a JSON object of hints about the tool's
	// behaviour, in the Model Context Protocol's form (title, readOnlyHint,
	// destructiveHint, idempotentHint, openWorldHint): what the MCP
	// endpoint lists. The runtime does not read it.
	Annotations json.RawMessage
	// Title, OutputSchema and Meta are what the MCP endpoint lists of the
	// tool besides: its name for display, the JSON Schema of its result's
	// structured content, and its _meta (whose keys beginning "carmy/"
	// are Carmy's own: the endpoint lists none of a tool's). OutputSchema
	// and Meta, when set, must be JSON objects. The runtime reads none
	// of them (it does not check a result against OutputSchema).
	Title        string
	OutputSchema json.RawMessage
	Meta         json.RawMessage
	Func         ToolFunc
	// Probe, when set, settles this tool's interrupted executions by
	// asking its upstream whether their effect happened (docs/config.md#reconcile-probes;
	// RunProbes), for ProbeGiveUp after each started (DefaultProbeGiveUp
	// when zero).
	Probe       ProbeFunc
	ProbeGiveUp time.Duration
	// MarksSent says that Func calls an upstream and calls MarkSent once
	// the first byte of its request has left this node (as HTTPTool's
	// Func and an upstream MCP server's tools do), so that a caller that
	// waits for it (Request.OnSent: an MCP task call) is not told before.
	// Without it, the tool counts as sent when it is invoked.
	MarksSent bool
}

// ToolInfo describes a registered tool.
type ToolInfo struct {
	Name        string
	Description string
	InputSchema json.RawMessage
	Timeout     time.Duration
	// Annotations is ToolSpec.Annotations (nil when unknown).
	Annotations json.RawMessage
	// Title, OutputSchema and Meta are ToolSpec's (empty when unknown).
	Title        string
	OutputSchema json.RawMessage
	Meta         json.RawMessage
	// Effects and RetryUncertain are ToolSpec's (Effects filled in).
	Effects        Effects
	RetryUncertain bool
	// Approval is ToolSpec's (nil: not gated).
	Approval *Approval
}

// ToolOption sets a field of a ToolSpec.
type ToolOption func(*ToolSpec)

// Description sets the tool's description.
func Description(d string) ToolOption { return func(s *ToolSpec) { s.Description = d } }

// InputSchema sets the JSON Schema of the tool's arguments.
func InputSchema(schema json.RawMessage) ToolOption {
	return func(s *ToolSpec) { s.InputSchema = schema }
}

// Annotations sets the tool's behaviour hints (ToolSpec.Annotations).
func Annotations(a json.RawMessage) ToolOption { return func(s *ToolSpec) { s.Annotations = a } }

// Timeout sets the tool's timeout.
func Timeout(d time.Duration) ToolOption { return func(s *ToolSpec) { s.Timeout = d } }

// DedupeWindow sets the tool's dedupe window for calls without a
// request_id.
func DedupeWindow(d time.Duration) ToolOption { return func(s *ToolSpec) { s.DedupeWindow = d } }

// RequireRequestID makes calls without a request_id invalid.
func RequireRequestID() ToolOption { return func(s *ToolSpec) { s.RequireRequestID = true } }

// WithEffects sets what repeating the tool does (ToolSpec.Effects).
func WithEffects(e Effects) ToolOption { return func(s *ToolSpec) { s.Effects = e } }

// RetryUncertain lets a retry settle an idempotent tool's timed_out or
// interrupted execution by running it again (ToolSpec.RetryUncertain).
func RetryUncertain() ToolOption { return func(s *ToolSpec) { s.RetryUncertain = true } }

// DefaultToolTimeout bounds a tool that declares no timeout.
const DefaultToolTimeout = 30 * time.Second

// tool is a registered, validated ToolSpec.
type tool struct {
	ToolSpec
	schema *schema
	group  string // the tool group it belongs to ("" for none; group.go)
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// ReservedPrefix names Carmy's own tools (the reconcile tools of MCP,
// docs/mcp.md, "Reconciling from the model"): no registered tool may be named it or begin with it and a
// dot, in any case.
const ReservedPrefix = "carmy"

// ReservedToolName reports whether name is ReservedPrefix, or begins
// with it and a dot, in any case.
func ReservedToolName(name string) bool {
	n := len(ReservedPrefix)
	return len(name) >= n && strings.EqualFold(name[:n], ReservedPrefix) && (len(name) == n || name[n] == '.')
}

func newTool(spec ToolSpec) (*tool, error) {
	switch {
	case !toolName.MatchString(spec.Name):
		return nil, fmt.Errorf("tool %q: name must be 1-128 characters of A-Z a-z 0-9 _ . : -", spec.Name)
	case ReservedToolName(spec.Name):
		return nil, fmt.Errorf("tool %q: the names %s and %s.* are reserved for Carmy's own tools", spec.Name, ReservedPrefix, ReservedPrefix)
	case spec.Func == nil:
		return nil, fmt.Errorf("tool %q: no function", spec.Name)
	case spec.Timeout < 0:
		return nil, fmt.Errorf("tool %q: negative timeout", spec.Name)
	case spec.DedupeWindow < 0:
		return nil, fmt.Errorf("tool %q: negative dedupe window", spec.Name)
	case len(spec.Annotations) > 0 && !isJSONObject(spec.Annotations):
		return nil, fmt.Errorf("tool %q: annotations must be a JSON object", spec.Name)
	case len(spec.OutputSchema) > 0 && !isJSONObject(spec.OutputSchema):
		return nil, fmt.Errorf("tool %q: the output schema must be a JSON object", spec.Name)
	case len(spec.Meta) > 0 && !isJSONObject(spec.Meta):
		return nil, fmt.Errorf("tool %q: _meta must be a JSON object", spec.Name)
	}
	effects, err := checkEffects(spec)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", spec.Name, err)
	}
	spec.Effects = effects
	if err := checkApproval(&spec); err != nil {
		return nil, fmt.Errorf("tool %q: %w", spec.Name, err)
	}
	if spec.Timeout == 0 {
		spec.Timeout = DefaultToolTimeout
	}
	t := &tool{ToolSpec: spec}
	if len(spec.InputSchema) > 0 && !anyObject(spec.InputSchema) {
		sch, err := compileSchema(spec.Name, spec.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %q: input_schema: %w", spec.Name, err)
		}
		t.schema = sch
	}
	return t, nil
}

// checkArguments validates arguments (already known to be a JSON object)
// against the tool's schema.
func (t *tool) checkArguments(args json.RawMessage) error {
	if t.schema == nil {
		return nil
	}
	return t.schema.validate(args)
}

func (t *tool) info() ToolInfo {
	return ToolInfo{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Timeout: t.Timeout, Annotations: t.Annotations,
		Title: t.Title, OutputSchema: t.OutputSchema, Meta: t.Meta, Effects: t.Effects, RetryUncertain: t.RetryUncertain, Approval: t.Approval}
}

// callOf builds the tool's view of a call.
func callOf(p *pending, rec store.Record) Call {
	c := Call{
		Tool:         p.req.Tool,
		Arguments:    p.args,
		Metadata:     p.meta,
		Principal:    p.caller.Principal,
		SessionID:    p.req.SessionID,
		RequestID:    p.req.RequestID,
		ExecutionID:  rec.ExecutionID,
		FencingToken: rec.Seq,
	}
	if c.RequestID != "" {
		c.IdempotencyKey = rec.Key.IdempotencyKey()
	}
	return c
}
