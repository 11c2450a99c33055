package jcs

import (
	"sync"

	"github.com/carmyhq/carmy/internal/jsonscan"
)

// AppendCanonical appends the RFC 8785 canonical form of the single JSON
// value in data to dst and returns the extended slice. On failure it
// returns dst with its original length (bytes beyond that length may have
// been overwritten) and an error wrapping one of the package's sentinel
// errors.
//
// Data that is canonical already (what an agent that canonicalises, or
// Carmy itself, sends) is recognised in one scan and appended as it is;
// anything else is parsed.
func AppendCanonical(dst, data []byte) ([]byte, error) {
	if isCanonical(data) {
		return append(dst, data...), nil
	}
	return appendParsed(dst, data)
}

// Canonical returns the RFC 8785 canonical form of the single JSON value
// in data, as AppendCanonical writes it: data itself when it is canonical
// already (the result then aliases data), else a new slice. Errors are
// AppendCanonical's.
func Canonical(data []byte) ([]byte, error) {
	if isCanonical(data) {
		return data, nil
	}
	if len(data) > maxPooledScratch/2 {
		// Room for an object's parsed members and its canonical form.
		return appendParsed(make([]byte, 0, 2*len(data)+64), data)
	}
	// Parsed into a pooled buffer (objects take room for their members
	// and for their canonical form), then copied out at its size.
	scratch := scratchPool.Get().(*[]byte)
	out, err := appendParsed((*scratch)[:0], data)
	var canonical []byte
	if err == nil {
		canonical = append([]byte(nil), out...)
	}
	if cap(out) <= maxPooledScratch {
		*scratch = out[:0]
		scratchPool.Put(scratch)
	}
	return canonical, err
}

// scratchPool holds the buffers Canonical parses into; a buffer that
// grew past maxPooledScratch is left to the collector.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledScratch = 64 << 10

// appendParsed is AppendCanonical without its shortcut: it parses data
// and writes its canonical form.
func appendParsed(dst, data []byte) ([]byte, error) {
	p := parser{data: data, out: dst}
	p.skipSpace()
	if err := p.value(); err != nil {
		return dst, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return dst, errorAt(ErrSyntax, p.pos, "unexpected data after top-level value")
	}
	return p.out, nil
}

// parser is a recursive-descent parser that appends canonical JSON to out
// as it goes. Objects are first parsed into out and then rewritten in
// sorted order (see object).
type parser struct {
	data  []byte
	pos   int
	depth int

	out []byte
	// members is a stack shared by all open objects; each object uses
	// the suffix that starts where it found the stack.
	members []member
	// scratch holds the decoded text of the string value being parsed.
	scratch []byte
}

func (p *parser) skipSpace() {
	p.pos = jsonscan.SkipSpace(p.data, p.pos)
}

// value parses the value starting at p.pos (whitespace already skipped)
// and appends its canonical form to p.out.
func (p *parser) value() error {
	if p.pos >= len(p.data) {
		return errorAt(ErrSyntax, p.pos, "unexpected end of input, expecting value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.stringValue()
	case c == '-' || jsonscan.IsDigit(c):
		return p.number()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	default:
		return errorAt(ErrSyntax, p.pos, "unexpected character, expecting value")
	}
}

func (p *parser) literal(lit string) error {
	end, err := jsonscan.ScanLiteral(p.data, p.pos, lit)
	if err != nil {
		return scanError(err)
	}
	p.pos = end
	p.out = append(p.out, lit...)
	return nil
}

// enter records one more level of nesting, failing beyond MaxDepth.
func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return errorAt(ErrTooDeep, p.pos, "arrays and objects nested too deeply")
	}
	return nil
}

func (p *parser) array() error {
	if err := p.enter(); err != nil {
		return err
	}
	p.pos++ // '['
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		p.out = append(p.out, ']')
		return nil
	}
	for {
		if err := p.value(); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return errorAt(ErrSyntax, p.pos, "unexpected end of input in array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
			p.skipSpace()
		case ']':
			p.pos++
			p.depth--
			p.out = append(p.out, ']')
			return nil
		default:
			return errorAt(ErrSyntax, p.pos, "expecting ',' or ']' in array")
		}
	}
}
