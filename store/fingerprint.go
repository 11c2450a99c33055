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
	args, err := canonicalObject("arguments", arguments)
	if err != nil {
		return "", err
	}
	meta, err := canonicalObject("metadata", metadata)
	if err != nil {
		return "", err
	}
	return FingerprintCanonical(tool, args, meta)
}

// FingerprintCanonical is Fingerprint of arguments and metadata that are
// canonical already: each empty (standing for {}) or a JSON object as
// RFC 8785 writes it (jcs.Canonical's or jcs.AppendCanonical's output),
// from a decoder that canonicalised them while it checked them. It does
// not canonicalise them again, nor check them beyond their first byte:
// given bytes that are not canonical, it returns a fingerprint that no
// call through Fingerprint matches. The result equals Fingerprint's of
// the same call (TestFingerprintCanonicalMatches).
func FingerprintCanonical(tool string, arguments, metadata []byte) (string, error) {
	if len(arguments)+len(metadata) > 512 {
		return fingerprintStreamed(tool, arguments, metadata)
	}
	// Most calls fit in the stack buffer: no allocation but the answer.
	var stack [1024]byte
	buf := append(stack[:0], `{"arguments":`...)
	buf, err := appendCanonicalObject(buf, "arguments", arguments)
	if err != nil {
		return "", err
	}
	buf = append(buf, `,"metadata":`...)
	if buf, err = appendCanonicalObject(buf, "metadata", metadata); err != nil {
		return "", err
	}
	return finish(buf, tool)
}

// fingerprintStreamed is FingerprintCanonical of large arguments or
// metadata, hashed where they are rather than copied first.
func fingerprintStreamed(tool string, arguments, metadata []byte) (string, error) {
	empty := []byte("{}")
	if len(arguments) == 0 {
		arguments = empty
	} else if arguments[0] != '{' {
		return "", &FieldError{Field: "arguments", Err: fmt.Errorf("must be a JSON object")}
	}
	if len(metadata) == 0 {
		metadata = empty
	} else if metadata[0] != '{' {
		return "", &FieldError{Field: "metadata", Err: fmt.Errorf("must be a JSON object")}
	}
	var stack [256]byte
	buf := append(stack[:0], `{"arguments":`...)
	h := sha256.New()
	h.Write(buf)
	h.Write(arguments)
	buf = append(buf[:0], `,"metadata":`...)
	h.Write(buf)
	h.Write(metadata)
	buf, err := appendTool(buf[:0], tool)
	if err != nil {
		return "", err
	}
	h.Write(buf)
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])), nil
}

// finish appends the tool member to buf, {"arguments":…,"metadata":…
// in canonical form, closes it and returns its hash in hex.
func finish(buf []byte, tool string) (string, error) {
	buf, err := appendTool(buf, tool)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:]), nil
}

// appendTool appends the tool member and the closing brace:
// ,"tool":"…"}.
func appendTool(buf []byte, tool string) ([]byte, error) {
	buf = append(buf, `,"tool":`...)
	if plainName(tool) {
		// Its JSON string, canonical as it is.
		buf = append(buf, '"')
		buf = append(buf, tool...)
		buf = append(buf, '"')
	} else {
		name, err := json.Marshal(tool)
		if err != nil {
			return nil, fmt.Errorf("%w: tool: %w", ErrInvalid, err)
		}
		if name, err = jcs.Canonical(name); err != nil {
			return nil, fmt.Errorf("%w: tool: %w", ErrInvalid, err)
		}
		buf = append(buf, name...)
	}
	return append(buf, '}'), nil
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

// canonicalObject returns the canonical form of raw, a call's field,
// which must be empty (returned as it is) or a JSON object.
func canonicalObject(field string, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	out, err := jcs.Canonical(raw)
	if err != nil {
		return nil, &FieldError{Field: field, Err: err}
	}
	if out[0] != '{' {
		return nil, &FieldError{Field: field, Err: fmt.Errorf("must be a JSON object")}
	}
	return out, nil
}

// appendCanonicalObject appends canonical, a call's field in canonical
// form, {} when it is empty.
func appendCanonicalObject(dst []byte, field string, canonical []byte) ([]byte, error) {
	if len(canonical) == 0 {
		return append(dst, "{}"...), nil
	}
	if canonical[0] != '{' {
		return nil, &FieldError{Field: field, Err: fmt.Errorf("must be a JSON object")}
	}
	return append(dst, canonical...), nil
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
