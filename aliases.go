package carmy

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/carmyhq/carmy/engine"
)

// The runtime's types, under the names a Go user of package carmy knows.
// They are package engine's: see there for their contracts.
type (
	// Call is what a tool sees of the call it serves.
	Call = engine.Call
	// Caller is who makes a call, as authentication established it.
	Caller = engine.Caller
	// Request is one call of a tool.
	Request = engine.Request
	// Response is the answer to a call.
	Response = engine.Response
	// ToolInfo describes a registered tool.
	ToolInfo = engine.ToolInfo
	// Resolution is an outcome a caller established for an interrupted
	// execution.
	Resolution = engine.Resolution
	// ListRequest is what a caller asks of List: a session or every
	// session, and the filters (status, tool, principal, attention).
	ListRequest = engine.ListRequest
	// ToolFunc is a tool's body.
	ToolFunc = engine.ToolFunc
	// ToolSpec declares a tool.
	ToolSpec = engine.ToolSpec
	// ToolOption sets a field of a ToolSpec.
	ToolOption = engine.ToolOption
	// ToolError is an error a tool returns to choose the recorded code.
	ToolError = engine.ToolError
	// HTTPTool configures a tool that calls an upstream over HTTP.
	HTTPTool = engine.HTTPTool
	// Config holds the runtime's settings.
	Config = engine.Config
	// Option changes the runtime's Config.
	Option = engine.Option
	// Liveness tells whether another node's runner is known to be gone.
	Liveness = engine.Liveness
	// Readier tells whether a backend can serve.
	Readier = engine.Readier
	// CancelNotifier delivers the cancels a backend applies on other
	// nodes' behalf.
	CancelNotifier = engine.CancelNotifier
	// Backend is everything the runtime asks of where its records live.
	Backend = engine.Backend
	// Basic is the Backend of a store that knows nothing beside its
	// records.
	Basic = engine.Basic
)

// Constants of the runtime.
const (
	// AnonymousPrincipal is the principal of every caller when auth is off.
	AnonymousPrincipal = engine.AnonymousPrincipal
	// ResolutionReleased is the Resolution status that removes a
	// reservation.
	ResolutionReleased = engine.ResolutionReleased

	DefaultNodeID         = engine.DefaultNodeID
	DefaultMaxResultBytes = engine.DefaultMaxResultBytes
	DefaultStoreTimeout   = engine.DefaultStoreTimeout
	DefaultDrainTimeout   = engine.DefaultDrainTimeout
	DefaultMaxRunning     = engine.DefaultMaxRunning
	DefaultToolTimeout    = engine.DefaultToolTimeout

	CodeToolError      = engine.CodeToolError
	CodeTimeout        = engine.CodeTimeout
	CodeCancelled      = engine.CodeCancelled
	CodeResultTooLarge = engine.CodeResultTooLarge
)

// Sentinel errors of the runtime.
var (
	// ErrUnknownTool: no tool of that name is registered.
	ErrUnknownTool = engine.ErrUnknownTool
	// ErrClosed: the runtime is shutting down and takes no new calls.
	ErrClosed = engine.ErrClosed
	// ErrPrincipalForbidden: a caller that is not an admin listed another
	// principal's executions.
	ErrPrincipalForbidden = engine.ErrPrincipalForbidden
)

// WithNodeID sets the node id.
func WithNodeID(id string) Option { return engine.WithNodeID(id) }

// WithNoPreviousExecutions declares that no earlier process ran
// executions under this node's id: a fresh node takes calls while its
// store gets ready (engine.Config.NoPreviousExecutions).
func WithNoPreviousExecutions() Option { return engine.WithNoPreviousExecutions() }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return engine.WithLogger(l) }

// WithMaxResultBytes sets the bound on one result's data.
func WithMaxResultBytes(n int) Option { return engine.WithMaxResultBytes(n) }

// WithStoreTimeout sets the bound on one store write.
func WithStoreTimeout(d time.Duration) Option { return engine.WithStoreTimeout(d) }

// WithDrainTimeout sets how long shutdown waits for running tools.
func WithDrainTimeout(d time.Duration) Option { return engine.WithDrainTimeout(d) }

// WithMaxRunning bounds the tools running at once on this node (0: no
// bound).
func WithMaxRunning(n int) Option { return engine.WithMaxRunning(n) }

// WithMaxInflightBytes bounds the bytes of arguments and results the calls
// on this node hold in flight; past it a new call is refused UNAVAILABLE
// before anything is reserved (engine.Config.MaxInflightBytes; 0: no
// bound). The default is DefaultMaxInflightBytes().
func WithMaxInflightBytes(n int64) Option { return engine.WithMaxInflightBytes(n) }

// DefaultMaxInflightBytes is the default bound on the bytes in flight,
// sized from the memory the process may use (engine.DefaultMaxInflightBytes).
func DefaultMaxInflightBytes() int64 { return engine.DefaultMaxInflightBytes() }

// WithMaxRunningPerPrincipal sets each non-admin principal's share of the
// tools running at once on this node (0: no share); the admin is never
// starved by the others (engine.Config.MaxRunningPerPrincipal).
func WithMaxRunningPerPrincipal(n int) Option { return engine.WithMaxRunningPerPrincipal(n) }

// Description sets a tool's description.
func Description(d string) ToolOption { return engine.Description(d) }

// InputSchema sets the JSON Schema of a tool's arguments.
func InputSchema(schema json.RawMessage) ToolOption { return engine.InputSchema(schema) }

// Timeout sets a tool's timeout.
func Timeout(d time.Duration) ToolOption { return engine.Timeout(d) }

// RequireRequestID makes a tool's calls without a request_id invalid.
func RequireRequestID() ToolOption { return engine.RequireRequestID() }

// Effects says what repeating a tool does (engine.Effects, docs/policy.md).
type Effects = engine.Effects

// The effects a tool may declare (engine's).
const (
	EffectsOnce       = engine.EffectsOnce
	EffectsIdempotent = engine.EffectsIdempotent
	EffectsReadOnly   = engine.EffectsReadOnly
)

// WithEffects sets what repeating a tool does: EffectsOnce (the default),
// EffectsIdempotent or EffectsReadOnly (engine.WithEffects).
func WithEffects(e Effects) ToolOption { return engine.WithEffects(e) }

// RetryUncertain lets a retry settle an idempotent tool's timed_out or
// interrupted execution by running it again (engine.RetryUncertain).
func RetryUncertain() ToolOption { return engine.RetryUncertain() }

// DemoTools returns the demo tools of docs/cli.md#--dev.
func DemoTools() []ToolSpec { return engine.DemoTools() }

// NewExecutionID returns a new execution id (see engine.NewExecutionID).
func NewExecutionID(now time.Time) string { return engine.NewExecutionID(now) }
