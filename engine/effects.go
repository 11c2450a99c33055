package engine

import "fmt"

// Effects says what repeating a tool does, and so what the runtime must do
// for its calls (docs/policy.md). The zero value is EffectsOnce.
type Effects string

// The effects a tool may declare.
const (
	// EffectsOnce (the default) is a tool whose effect must happen at most
	// once per identity: a call with a request_id is reserved, recorded and
	// replayed.
	EffectsOnce Effects = "once"
	// EffectsIdempotent is a tool whose effect may be repeated safely. It
	// is recorded as EffectsOnce; with ToolSpec.RetryUncertain, a retry of
	// an identity whose execution was left timed_out or interrupted runs
	// the tool once more under a new fencing token and records that
	// outcome in place of the old one.
	EffectsIdempotent Effects = "idempotent"
	// EffectsReadOnly is a tool without effects: nothing is reserved or
	// recorded for its calls, request_id or not, and the call costs the
	// store no write. Response.Passthrough says so. An MCP task call
	// (Request.Task) is the one exception: it is recorded, so that it can
	// be polled.
	EffectsReadOnly Effects = "read_only"
)

// ParseEffects returns the Effects s names: "once", "idempotent",
// "read_only", or "" for EffectsOnce.
func ParseEffects(s string) (Effects, error) {
	switch e := Effects(s); e {
	case "":
		return EffectsOnce, nil
	case EffectsOnce, EffectsIdempotent, EffectsReadOnly:
		return e, nil
	}
	return "", fmt.Errorf("effects %q: want once, idempotent or read_only", s)
}

// EffectsOf returns what MCP behaviour hints (a tool's annotations, as
// ToolSpec.Annotations holds them) say of a tool's effects: readOnlyHint
// true is EffectsReadOnly, else idempotentHint true is EffectsIdempotent,
// else EffectsOnce. Only a caller that trusts the hints' author may act on
// them.
func EffectsOf(readOnlyHint, idempotentHint bool) Effects {
	switch {
	case readOnlyHint:
		return EffectsReadOnly
	case idempotentHint:
		return EffectsIdempotent
	}
	return EffectsOnce
}

// checkEffects validates a spec's Effects and RetryUncertain, and returns
// its Effects with the default filled in.
func checkEffects(spec ToolSpec) (Effects, error) {
	e, err := ParseEffects(string(spec.Effects))
	if err != nil {
		return "", err
	}
	if spec.RetryUncertain && e != EffectsIdempotent {
		return "", fmt.Errorf("retry_uncertain needs effects idempotent, not %s", e)
	}
	return e, nil
}
