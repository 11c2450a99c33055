package strictjson

import "github.com/carmyhq/carmy/internal/jsonscan"

// Quick reports whether value is one JSON value (with JSON whitespace
// around it or not) that Check accepts, as far as one pass that
// allocates nothing can tell. True is never wrong: such a value is valid
// JSON (jsonscan.Valid accepts it) and I-JSON (Check returns nil). False
// means only that Check must decide: Quick leaves to it every value it
// would refuse, and those it does not judge at a glance (nesting deeper
// than quickMaxDepth, more than quickMaxNames member names open at once,
// a member name with an escape, a number of more than 308 digits before
// its point, counting its exponent).
//
// It is what Check tries first; a caller that would run jsonscan.Valid
// and then Check over the same bytes may call Quick once instead, and
// both only when it says false (FuzzQuick holds it to jcs's verdict).
func Quick(value []byte) bool {
	var q quick
	i, ok := q.value(value, jsonscan.SkipSpace(value, 0), 0)
	return ok && jsonscan.SkipSpace(value, i) == len(value)
}

// Limits of Quick: beyond them it says false and Check decides.
const (
	quickMaxDepth = 64
	quickMaxNames = 64
	// quickMaxMagnitude is the most digits a number may have before its
	// point, its exponent counted: 10^308 is below the largest double.
	quickMaxMagnitude = 308
)

// quick is the state of one Quick pass: the names of the members of the
// objects open, innermost last (names[:n]).
type quick struct {
	names [quickMaxNames][]byte
	n     int
}

// value scans the value at data[i] (space skipped) at depth levels of
// nesting, and returns the index after it.
func (q *quick) value(data []byte, i, depth int) (int, bool) {
	if i >= len(data) {
		return i, false
	}
	switch c := data[i]; {
	case c == '"':
		end, flags, err := jsonscan.ScanString(data, i)
		if err != nil || flags&jsonscan.BadUTF8 != 0 {
			return end, false
		}
		return end, flags&jsonscan.Escaped == 0 || noLoneSurrogate(data[i:end])
	case c == '{':
		return q.object(data, i, depth+1)
	case c == '[':
		return q.array(data, i, depth+1)
	case c == '-' || jsonscan.IsDigit(c):
		return finiteNumber(data, i)
	case c == 't':
		end, err := jsonscan.ScanLiteral(data, i, "true")
		return end, err == nil
	case c == 'f':
		end, err := jsonscan.ScanLiteral(data, i, "false")
		return end, err == nil
	case c == 'n':
		end, err := jsonscan.ScanLiteral(data, i, "null")
		return end, err == nil
	}
	return i, false
}

// object scans the object at data[i]; its member names must be plain
// (no escape, valid UTF-8: their bytes are their text) and distinct.
func (q *quick) object(data []byte, i, depth int) (int, bool) {
	if depth > quickMaxDepth {
		return i, false
	}
	i = jsonscan.SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, true
	}
	base := q.n
	for {
		if i >= len(data) || data[i] != '"' {
			return i, false
		}
		end, flags, err := jsonscan.ScanString(data, i)
		if err != nil || flags&(jsonscan.Escaped|jsonscan.BadUTF8) != 0 || q.n == quickMaxNames {
			return end, false
		}
		name := data[i+1 : end-1]
		for _, prev := range q.names[base:q.n] {
			if string(prev) == string(name) {
				return end, false
			}
		}
		q.names[q.n] = name
		q.n++
		if i = jsonscan.SkipSpace(data, end); i >= len(data) || data[i] != ':' {
			return i, false
		}
		var ok bool
		if i, ok = q.value(data, jsonscan.SkipSpace(data, i+1), depth); !ok {
			return i, false
		}
		if i = jsonscan.SkipSpace(data, i); i >= len(data) {
			return i, false
		}
		switch data[i] {
		case ',':
			i = jsonscan.SkipSpace(data, i+1)
		case '}':
			q.n = base
			return i + 1, true
		default:
			return i, false
		}
	}
}

// array scans the array at data[i].
func (q *quick) array(data []byte, i, depth int) (int, bool) {
	if depth > quickMaxDepth {
		return i, false
	}
	i = jsonscan.SkipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = q.value(data, i, depth); !ok {
			return i, false
		}
		if i = jsonscan.SkipSpace(data, i); i >= len(data) {
			return i, false
		}
		switch data[i] {
		case ',':
			i = jsonscan.SkipSpace(data, i+1)
		case ']':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// finiteNumber scans the number at data[i] and reports whether it is
// certainly within a double's range: its integer digits and its exponent
// (a negative one only makes it smaller, at worst zero) add up to at
// most quickMaxMagnitude.
func finiteNumber(data []byte, i int) (int, bool) {
	n, err := jsonscan.ScanNumber(data, i)
	if err != nil {
		return n.End, false
	}
	if n.Integer {
		return n.End, n.IntDigits <= quickMaxMagnitude
	}
	exp, negative := 0, false
	for j := i; j < n.End; j++ {
		if data[j] != 'e' && data[j] != 'E' {
			continue
		}
		j++
		if data[j] == '+' || data[j] == '-' {
			negative = data[j] == '-'
			j++
		}
		for ; j < n.End; j++ {
			if exp = exp*10 + int(data[j]-'0'); exp > quickMaxMagnitude {
				if negative {
					return n.End, n.IntDigits <= quickMaxMagnitude
				}
				return n.End, false
			}
		}
	}
	if negative {
		exp = -exp
	}
	return n.End, n.IntDigits+exp <= quickMaxMagnitude
}

// noLoneSurrogate reports whether the string token s (quotes included,
// valid syntax) escapes no lone surrogate: every \uD800 to \uDBFF is
// followed at once by \uDC00 to \uDFFF, and no \uDC00 to \uDFFF comes
// alone.
func noLoneSurrogate(s []byte) bool {
	for i := 1; i < len(s)-1; i++ {
		if s[i] != '\\' {
			continue
		}
		if s[i+1] != 'u' {
			i++ // a one-character escape
			continue
		}
		r := hexValue(s[i+2 : i+6])
		i += 5
		switch {
		case r < 0xD800 || r > 0xDFFF:
		case r >= 0xDC00:
			return false
		default:
			if i+6 >= len(s) || s[i+1] != '\\' || s[i+2] != 'u' {
				return false
			}
			if low := hexValue(s[i+3 : i+7]); low < 0xDC00 || low > 0xDFFF {
				return false
			}
			i += 6
		}
	}
	return true
}

// hexValue is the value of four hexadecimal digits (checked by the
// scanner).
func hexValue(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a':
			r = r<<4 | rune(c-'a'+10)
		default:
			r = r<<4 | rune(c-'A'+10)
		}
	}
	return r
}
