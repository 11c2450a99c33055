package mcpgateway

import (
	"encoding/json"

	"github.com/carmyhq/carmy/engine"
)

// redactValue returns an upstream's result encoded as JSON, with every
// configured secret (header and env values, the URL's query and
// userinfo) replaced by "[redacted]" in the decoded text of its strings
// and keys, before it is recorded: an upstream that echoes what it was
// sent does not hand its credentials to whoever may read the record. The
// redactor is HTTP tools' (egress.Redactor.RedactJSON): only the strings
// that held a secret are written anew, the rest kept as encoded. With no
// secret configured, v is returned as it is.
func (u *Upstream) redactValue(v any) (any, error) {
	if u.redactor == nil {
		return v, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, &engine.ToolError{Code: engine.CodeToolError, Message: "the upstream's result cannot be encoded as JSON"}
	}
	red, _ := u.redactor.RedactJSON(raw)
	return json.RawMessage(red), nil
}
