package mcpgateway

import (
	"bytes"
	"encoding/json"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/egress"
)

// redactValue returns an upstream's result with every configured secret
// (header and env values, the URL's query and userinfo) replaced by
// "[redacted]" in its strings and keys, before it is recorded: an
// upstream that echoes what it was sent does not hand its credentials to
// whoever may read the record. A result with nothing to redact is
// returned as encoded (its keys in the upstream's order); a redacted one
// is re-encoded, its keys sorted.
func (u *Upstream) redactValue(v any) (any, error) {
	if u.redactor == nil {
		return v, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, &engine.ToolError{Code: engine.CodeToolError, Message: "the upstream's result cannot be encoded as JSON"}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers as the upstream wrote them
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, &engine.ToolError{Code: engine.CodeToolError, Message: "the upstream's result cannot be encoded as JSON"}
	}
	doc, changed := redactJSON(doc, u.redactor)
	if !changed {
		return json.RawMessage(raw), nil
	}
	return doc, nil
}

// redactJSON redacts the strings and keys of a decoded JSON value, and
// tells whether it replaced anything.
func redactJSON(v any, r *egress.Redactor) (any, bool) {
	switch x := v.(type) {
	case string:
		out := r.Redact(x)
		return out, out != x
	case []any:
		changed := false
		for i, e := range x {
			var c bool
			x[i], c = redactJSON(e, r)
			changed = changed || c
		}
		return x, changed
	case map[string]any:
		changed := false
		out := make(map[string]any, len(x))
		for k, e := range x {
			rk := r.Redact(k)
			var c bool
			out[rk], c = redactJSON(e, r)
			changed = changed || c || rk != k
		}
		return out, changed
	}
	return v, false
}
