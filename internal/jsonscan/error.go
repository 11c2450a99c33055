package jsonscan

import "strconv"

// Kind says what class of problem an [Error] reports.
type Kind uint8

const (
	// Syntax is text that is not RFC 8259 JSON.
	Syntax Kind = iota + 1
	// InvalidUTF8 is a string that is not valid UTF-8 once decoded: a
	// raw invalid byte or an escaped lone surrogate (I-JSON, RFC 7493).
	InvalidUTF8
	// TooDeep is nesting beyond the limit the caller gave.
	TooDeep
)

// Error is a problem at a byte offset of the text scanned.
type Error struct {
	Kind Kind
	// Off is the offset, in the text given, at which the problem was
	// found.
	Off int
	// Msg says what is wrong, without the offset ("unterminated
	// string").
	Msg string
}

func (e *Error) Error() string { return e.Msg + " at offset " + strconv.Itoa(e.Off) }

func errorAt(kind Kind, off int, msg string) *Error { return &Error{Kind: kind, Off: off, Msg: msg} }
