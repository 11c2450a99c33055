// Package strictjson is Carmy's one rule for the JSON its clients send,
// over the HTTP API (package api) and over MCP (package api/mcp) alike:
// every value must be I-JSON (RFC 7493). An object at any depth must not
// repeat a member name (however its escapes spell it), a string or name
// must be valid UTF-8 (no raw invalid bytes, no escaped lone surrogate,
// which encoding/json would turn into U+FFFD), a number must be within
// the range of a double, and nesting must stay within jcs.MaxDepth.
//
// These are the values RFC 8785 canonicalisation, and so
// store.Fingerprint, refuses: holding every request to them means that no
// part of the system (a decoder that keeps the first of two members, one
// that keeps the last, a schema validator, the tool, its upstream) can
// read a value other than the one the rest reads.
package strictjson

import (
	"errors"
	"strings"
	"sync"

	"github.com/carmyhq/carmy/store/jcs"
)

// Check returns nil when value, one JSON value, is I-JSON; else an error
// that wraps the jcs sentinel at fault (jcs.ErrDuplicateKey,
// jcs.ErrInvalidUTF8, jcs.ErrNumber, jcs.ErrTooDeep or jcs.ErrSyntax). It
// is safe for concurrent use. What Quick accepts it accepts without
// allocating; anything else it canonicalises (jcs.AppendCanonical), whose
// error says what is wrong and where.
func Check(value []byte) error {
	if plainValue(value) || Quick(value) {
		return nil
	}
	scratch := scratchPool.Get().(*[]byte)
	out, err := jcs.AppendCanonical((*scratch)[:0], value)
	if cap(out) <= maxPooledScratch {
		*scratch = out[:0]
		scratchPool.Put(scratch)
	}
	return err
}

// Canonical is Check that keeps what it makes: the RFC 8785 canonical
// form of value (jcs.Canonical: value itself when it is canonical
// already, else a new slice), for a fingerprint that need not
// canonicalise value again (store.FingerprintCanonical).
func Canonical(value []byte) ([]byte, error) {
	return jcs.Canonical(value)
}

// Reason words an error of Check for a client: what is wrong, and at
// which byte of the value checked ("duplicate object member name \"a\" at
// offset 12"), without the jcs prefix and sentinel suffix.
func Reason(err error) string {
	why := strings.TrimPrefix(err.Error(), "jcs: ")
	for _, sentinel := range []error{jcs.ErrDuplicateKey, jcs.ErrInvalidUTF8, jcs.ErrNumber, jcs.ErrTooDeep, jcs.ErrSyntax} {
		if errors.Is(err, sentinel) {
			why = strings.TrimSuffix(why, ": "+sentinel.Error())
		}
	}
	return why
}

// plainValue reports a value that is I-JSON on its face: a literal, or a
// string of printable ASCII without escapes (most request_ids, tools and
// session_ids).
func plainValue(v []byte) bool {
	switch string(v) {
	case "true", "false", "null":
		return true
	}
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return false
	}
	for _, c := range v[1 : len(v)-1] {
		if c == '\\' || c == '"' || c < 0x20 || c >= 0x80 {
			return false
		}
	}
	return true
}

// scratchPool holds the buffers Check canonicalises into; a buffer that
// grew past maxPooledScratch is left to the collector.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledScratch = 64 << 10
