package jsonscan

import (
	"bytes"
	"encoding/json"
)

// MarshalNoHTML is encoding/json's Marshal without HTML escaping: the
// text an Encoder with SetEscapeHTML(false) writes, without its final
// newline (strings escaped as [NoHTML] escapes them), as a RawMessage so
// that it stays JSON wherever it is put. The MCP SDK encodes its messages
// so.
func MarshalNoHTML(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
