package jcs

import (
	"strconv"

	"github.com/carmyhq/carmy/internal/jsonscan"
)

// number parses the RFC 8259 number at p.pos and appends its canonical
// form to p.out.
func (p *parser) number() error {
	start := p.pos
	n, err := jsonscan.ScanNumber(p.data, start)
	if err != nil {
		return scanError(err)
	}
	p.pos = n.End
	text := p.data[start:n.End]

	// Fast path: a plain integer of at most 15 digits is exactly
	// representable and ECMAScript prints it digit for digit. The
	// grammar already excludes leading zeros.
	if n.Integer && n.IntDigits <= 15 {
		if len(text) == 2 && text[0] == '-' && text[1] == '0' {
			p.out = append(p.out, '0') // -0 prints as 0
		} else {
			p.out = append(p.out, text...)
		}
		return nil
	}

	// The text is valid JSON number syntax, so ParseFloat can only fail
	// with a range error (magnitude too large for a double); underflow
	// rounds to zero or a subnormal without error.
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return errorAt(ErrNumber, start, "number not representable as a finite double")
	}
	p.out = appendNumber(p.out, f)
	return nil
}

// appendNumber appends f formatted as ECMAScript's Number.prototype.toString
// does (ECMA-262 Number::toString, as required by RFC 8785 section
// 3.2.2.3). f must be finite.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // also -0
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}

	// Shortest round-trip digits in the form d[.ddd]e±XX.
	var buf [32]byte
	b := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	var digits [17]byte
	k, i := 0, 0
	for ; b[i] != 'e'; i++ {
		if b[i] != '.' {
			digits[k] = b[i]
			k++
		}
	}
	i++ // 'e'
	expNeg := b[i] == '-'
	i++ // sign
	e := 0
	for ; i < len(b); i++ {
		e = e*10 + int(b[i]-'0')
	}
	if expNeg {
		e = -e
	}

	// In ECMA-262 terms the value is 0.d1d2...dk × 10^n.
	n := e + 1
	ds := digits[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, ds...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, ds[:n]...)
		dst = append(dst, '.')
		dst = append(dst, ds[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, ds...)
	default:
		dst = append(dst, ds[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, ds[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
			dst = strconv.AppendInt(dst, int64(n-1), 10)
		} else {
			dst = append(dst, '-')
			dst = strconv.AppendInt(dst, int64(1-n), 10)
		}
	}
	return dst
}
