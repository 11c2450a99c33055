package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/carmyhq/carmy/store/jcs"
)

// Fingerprint returns the fingerprint of a call: the lowercase hex SHA-256
// of the RFC 8785 canonical JSON of
// {"tool": tool, "arguments": arguments, "metadata": metadata}.
// Empty arguments or metadata stand for {}. Both must be JSON objects;
// otherwise, or when either is not canonicalisable (duplicate member names,
// invalid UTF-8, a number beyond float64), it returns an error wrapping
// ErrInvalid that names the field.
func Fingerprint(tool string, arguments, metadata json.RawMessage) (string, error) {
	buf := make([]byte, 0, 64+len(arguments)+len(metadata)+len(tool))
	buf = append(buf, `{"arguments":`...)
	buf, err := appendObject(buf, "arguments", arguments)
	if err != nil {
		return "", err
	}
	buf = append(buf, `,"metadata":`...)
	if buf, err = appendObject(buf, "metadata", metadata); err != nil {
		return "", err
	}
	buf = append(buf, `,"tool":`...)
	if plainName(tool) {
		// Its JSON string, canonical as it is.
		buf = append(buf, '"')
		buf = append(buf, tool...)
		buf = append(buf, '"')
	} else {
		name, err := json.Marshal(tool)
		if err != nil {
			return "", fmt.Errorf("%w: tool: %w", ErrInvalid, err)
		}
		if buf, err = jcs.AppendCanonical(buf, name); err != nil {
			return "", fmt.Errorf("%w: tool: %w", ErrInvalid, err)
		}
	}
	buf = append(buf, '}')
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:]), nil
}

// plainName reports whether s is printable ASCII without '"' or '\\', so
// that '"' + s + '"' is its canonical JSON string.
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func appendObject(dst []byte, field string, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return append(dst, "{}"...), nil
	}
	out, err := jcs.AppendCanonical(dst, raw)
	if err != nil {
		return nil, &FieldError{Field: field, Err: err}
	}
	if out[len(dst)] != '{' {
		return nil, &FieldError{Field: field, Err: fmt.Errorf("must be a JSON object")}
	}
	return out, nil
}

// FieldError says that one field of a call is malformed. It matches
// ErrInvalid.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *FieldError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// ErrorCode implements Coded.
func (e *FieldError) ErrorCode() string { return ErrInvalid.code }

// Fields returns the envelope's extra members.
func (e *FieldError) Fields() map[string]any { return map[string]any{"field": e.Field} }
