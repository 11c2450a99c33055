package jcs

import "github.com/carmyhq/carmy/internal/jsonscan"

// stringValue parses the string starting at p.pos and appends its
// canonical form to p.out.
func (p *parser) stringValue() error {
	var err error
	if p.scratch, err = p.decodeString(p.scratch[:0]); err != nil {
		return err
	}
	p.out = appendQuoted(p.out, p.scratch)
	return nil
}

// decodeString parses the string starting at p.pos (which holds the
// opening quote), appends its decoded UTF-8 text to dst and leaves p.pos
// after the closing quote. The appended text is guaranteed valid UTF-8:
// the scanner refuses invalid UTF-8 and lone surrogates (I-JSON).
func (p *parser) decodeString(dst []byte) ([]byte, error) {
	out, end, err := jsonscan.AppendUnquoted(dst, p.data, p.pos)
	if err != nil {
		return dst, scanError(err)
	}
	p.pos = end
	return out, nil
}

// appendQuoted appends s, which must be valid UTF-8, to dst as a
// canonical JSON string (RFC 8785 section 3.2.2.2): only '"', '\' and
// the control characters U+0000 to U+001F are escaped, using the short
// forms \b \t \n \f \r where they exist and lowercase \u00xx otherwise.
func appendQuoted(dst, s []byte) []byte {
	return jsonscan.AppendString(dst, s, jsonscan.Canonical)
}
