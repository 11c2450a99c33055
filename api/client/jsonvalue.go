package client

import (
	"bytes"
	"encoding/json"
)

// encodeJSON returns v as JSON: a json.RawMessage or []byte as it is
// (checked to be valid JSON), anything else through json.Marshal. nil
// (and JSON null) is returned as nil, for "absent".
func encodeJSON(name string, v any) (json.RawMessage, error) {
	var raw []byte
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, usage("%s: %v", name, err)
		}
		if string(b) == "null" {
			return nil, nil
		}
		return b, nil // valid and without surrounding space
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, usage("%s: not valid JSON", name)
	}
	return json.RawMessage(raw), nil
}

// encodeObject is encodeJSON for a member that must be a JSON object
// (arguments, metadata).
func encodeObject(name string, v any) (json.RawMessage, error) {
	raw, err := encodeJSON(name, v)
	if err != nil || raw == nil {
		return raw, err
	}
	if raw[0] != '{' {
		return nil, usage("%s must be a JSON object, not %s", name, snippet(raw))
	}
	return raw, nil
}
