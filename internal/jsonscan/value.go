package jsonscan

// MaxDepth is the deepest nesting of arrays and objects [ScanValue],
// [Valid] and [ObjectMembers] accept: encoding/json's limit, so that Valid
// answers as encoding/json's Valid does.
const MaxDepth = 10000

// ScanValue scans the JSON value that starts at data[i] (whitespace
// already skipped) and returns the index after it. Its syntax is RFC
// 8259's as encoding/json's Valid reads it (see [ScanString]), nesting
// within MaxDepth.
func ScanValue(data []byte, i int) (int, error) {
	return scanValue(data, i, 0)
}

func scanValue(data []byte, i, depth int) (int, error) {
	if i >= len(data) {
		return i, errorAt(Syntax, i, "unexpected end of input, expecting value")
	}
	switch c := data[i]; {
	case c == '"':
		end, _, err := ScanString(data, i)
		return end, err
	case c == '{':
		return scanObject(data, i, depth+1)
	case c == '[':
		return scanArray(data, i, depth+1)
	case c == '-' || IsDigit(c):
		n, err := ScanNumber(data, i)
		return n.End, err
	case c == 't':
		return ScanLiteral(data, i, "true")
	case c == 'f':
		return ScanLiteral(data, i, "false")
	case c == 'n':
		return ScanLiteral(data, i, "null")
	}
	return i, errorAt(Syntax, i, "unexpected character, expecting value")
}

func scanObject(data []byte, i, depth int) (int, error) {
	if depth > MaxDepth {
		return i, errorAt(TooDeep, i, "arrays and objects nested too deeply")
	}
	i = SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = scanMember(data, i, depth); err != nil {
			return i, err
		}
		if i >= len(data) {
			return i, errorAt(Syntax, i, "unexpected end of input in object")
		}
		switch data[i] {
		case ',':
			i = SkipSpace(data, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, errorAt(Syntax, i, "expecting ',' or '}' in object")
		}
	}
}

// scanMember scans the member whose name starts at data[i] and the space
// after its value; it returns the index after that space.
func scanMember(data []byte, i, depth int) (int, error) {
	if i >= len(data) || data[i] != '"' {
		return i, errorAt(Syntax, i, "expecting string for object member name")
	}
	i, _, err := ScanString(data, i)
	if err != nil {
		return i, err
	}
	if i = SkipSpace(data, i); i >= len(data) || data[i] != ':' {
		return i, errorAt(Syntax, i, "expecting ':' after object member name")
	}
	if i, err = scanValue(data, SkipSpace(data, i+1), depth); err != nil {
		return i, err
	}
	return SkipSpace(data, i), nil
}

func scanArray(data []byte, i, depth int) (int, error) {
	if depth > MaxDepth {
		return i, errorAt(TooDeep, i, "arrays and objects nested too deeply")
	}
	i = SkipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = scanValue(data, i, depth); err != nil {
			return i, err
		}
		if i = SkipSpace(data, i); i >= len(data) {
			return i, errorAt(Syntax, i, "unexpected end of input in array")
		}
		switch data[i] {
		case ',':
			i = SkipSpace(data, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, errorAt(Syntax, i, "expecting ',' or ']' in array")
		}
	}
}

// Valid reports whether data is one JSON value, with JSON whitespace
// around it or not: exactly what encoding/json's Valid accepts
// (FuzzValidMatchesEncodingJSON), in one pass without allocating.
func Valid(data []byte) bool {
	end, err := ScanValue(data, SkipSpace(data, 0))
	return err == nil && SkipSpace(data, end) == len(data)
}

// Member is one member of a JSON object.
type Member struct {
	// Name is the member's name as written: its string token, quotes
	// and escapes included.
	Name []byte
	// Value is the member's value as written, without the space around
	// it.
	Value []byte
}

// ObjectMembers appends to dst the members of the object data holds, in
// order, when data is one JSON object that [Valid] accepts; else it
// returns dst and false. Names and values alias data. Names are not
// decoded and may repeat: what a repeated or escaped name means is the
// caller's to decide.
func ObjectMembers(dst []Member, data []byte) ([]Member, bool) {
	base := len(dst)
	i := SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return dst, false
	}
	i = SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return dst, SkipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return dst[:base], false
		}
		nameEnd, _, err := ScanString(data, i)
		if err != nil {
			return dst[:base], false
		}
		name := data[i:nameEnd]
		if i = SkipSpace(data, nameEnd); i >= len(data) || data[i] != ':' {
			return dst[:base], false
		}
		i = SkipSpace(data, i+1)
		end, err := scanValue(data, i, 1)
		if err != nil {
			return dst[:base], false
		}
		dst = append(dst, Member{Name: name, Value: data[i:end]})
		if i = SkipSpace(data, end); i >= len(data) {
			return dst[:base], false
		}
		switch data[i] {
		case ',':
			i = SkipSpace(data, i+1)
		case '}':
			if SkipSpace(data, i+1) != len(data) {
				return dst[:base], false
			}
			return dst, true
		default:
			return dst[:base], false
		}
	}
}
