package jcs

import (
	"errors"
	"fmt"

	"github.com/carmyhq/carmy/internal/jsonscan"
)

// MaxDepth is the deepest nesting of arrays and objects accepted. A value
// nested more deeply is rejected with [ErrTooDeep].
const MaxDepth = 1000

// Sentinel errors. Every error returned by this package wraps exactly one
// of these; test for them with [errors.Is].
var (
	// ErrSyntax reports input that is not a single well-formed RFC 8259
	// JSON value: malformed tokens, unexpected characters, premature end
	// of input, or trailing data after the value.
	ErrSyntax = errors.New("invalid JSON syntax")

	// ErrDuplicateKey reports an object that repeats a member name.
	// RFC 8785 requires I-JSON input, which forbids duplicates.
	ErrDuplicateKey = errors.New("duplicate object member name")

	// ErrNumber reports a number that is not representable as a finite
	// IEEE-754 double, such as 1e400.
	ErrNumber = errors.New("number out of IEEE-754 double range")

	// ErrInvalidUTF8 reports a string or member name that is not valid
	// UTF-8, either because of invalid raw bytes or because an escape
	// sequence denotes a lone surrogate (for example "\ud800").
	ErrInvalidUTF8 = errors.New("invalid UTF-8 in string")

	// ErrTooDeep reports arrays or objects nested more deeply than
	// [MaxDepth].
	ErrTooDeep = errors.New("nesting too deep")
)

// errorAt returns an error wrapping sentinel that describes msg at the
// byte offset off of the input.
func errorAt(sentinel error, off int, msg string) error {
	return fmt.Errorf("jcs: %s at offset %d: %w", msg, off, sentinel)
}

// scanError is errorAt of an error of the scanner (a *jsonscan.Error),
// with the sentinel of its kind.
func scanError(err error) error {
	var e *jsonscan.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("jcs: %w: %w", ErrSyntax, err)
	}
	sentinel := ErrSyntax
	switch e.Kind {
	case jsonscan.InvalidUTF8:
		sentinel = ErrInvalidUTF8
	case jsonscan.TooDeep:
		sentinel = ErrTooDeep
	}
	return errorAt(sentinel, e.Off, e.Msg)
}
