package jcs

import (
	"bytes"
	"slices"
)

// member locates one parsed object member inside p.out:
// out[keyStart:keyEnd] is the decoded (unescaped UTF-8) name and
// out[keyEnd:valEnd] the canonical form of the value.
type member struct {
	keyStart, keyEnd, valEnd int
	off                      int // input offset of the name, for errors
}

// object parses the object at p.pos and appends its canonical form to
// p.out.
//
// Members are parsed into p.out past base as decoded name followed by
// canonical value (nested objects do the same further on and leave only
// their canonical form behind). Once the object is complete its members
// are sorted, the canonical object is appended after them, and that is
// moved down to base, overwriting the parsed members.
func (p *parser) object() error {
	if err := p.enter(); err != nil {
		return err
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		p.out = append(p.out, '{', '}')
		return nil
	}

	base, mbase := len(p.out), len(p.members)
	for {
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return errorAt(ErrSyntax, p.pos, "expecting string for object member name")
		}
		m := member{off: p.pos, keyStart: len(p.out)}
		var err error
		if p.out, err = p.decodeString(p.out); err != nil {
			return err
		}
		m.keyEnd = len(p.out)
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return errorAt(ErrSyntax, p.pos, "expecting ':' after object member name")
		}
		p.pos++
		p.skipSpace()
		if err := p.value(); err != nil {
			return err
		}
		m.valEnd = len(p.out)
		p.members = append(p.members, m)

		p.skipSpace()
		if p.pos >= len(p.data) {
			return errorAt(ErrSyntax, p.pos, "unexpected end of input in object")
		}
		if c := p.data[p.pos]; c == ',' {
			p.pos++
			p.skipSpace()
			continue
		} else if c != '}' {
			return errorAt(ErrSyntax, p.pos, "expecting ',' or '}' in object")
		}
		p.pos++
		break
	}

	members := p.members[mbase:]
	parsed := p.out // the members' bytes; p.out may be reallocated below
	key := func(m member) []byte { return parsed[m.keyStart:m.keyEnd] }
	slices.SortFunc(members, func(a, b member) int {
		return compareUTF16(key(a), key(b))
	})
	for i := 1; i < len(members); i++ {
		if bytes.Equal(key(members[i-1]), key(members[i])) {
			return errorAt(ErrDuplicateKey, max(members[i-1].off, members[i].off),
				"object member name repeated")
		}
	}

	start := len(p.out)
	p.out = append(p.out, '{')
	for i, m := range members {
		if i > 0 {
			p.out = append(p.out, ',')
		}
		p.out = appendQuoted(p.out, key(m))
		p.out = append(p.out, ':')
		p.out = append(p.out, parsed[m.keyEnd:m.valEnd]...)
	}
	p.out = append(p.out, '}')
	n := copy(p.out[base:], p.out[start:])
	p.out = p.out[:base+n]

	p.members = p.members[:mbase]
	p.depth--
	return nil
}
