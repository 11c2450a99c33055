package jsonscan

// Number says what a number scanned by [ScanNumber] looks like.
type Number struct {
	// End is the index after the number.
	End int
	// IntDigits is how many digits its integer part has.
	IntDigits int
	// Integer: it has neither a fraction nor an exponent.
	Integer bool
	// Negative: it begins with '-'.
	Negative bool
}

// IsDigit reports whether c is an ASCII digit.
func IsDigit(c byte) bool { return '0' <= c && c <= '9' }

// ScanNumber scans the RFC 8259 number that starts at data[i] (a '-' or a
// digit). It stops at the first byte that cannot continue the number;
// whether that byte may follow a number is the caller's to check.
func ScanNumber(data []byte, i int) (Number, error) {
	start := i
	n := Number{Integer: true}
	if i < len(data) && data[i] == '-' {
		n.Negative = true
		i++
	}
	intStart := i
	switch {
	case i >= len(data) || !IsDigit(data[i]):
		return n, errorAt(Syntax, start, "invalid number: missing integer digits")
	case data[i] == '0':
		i++
		if i < len(data) && IsDigit(data[i]) {
			return n, errorAt(Syntax, start, "invalid number: leading zero")
		}
	default:
		for i < len(data) && IsDigit(data[i]) {
			i++
		}
	}
	n.IntDigits = i - intStart
	if i < len(data) && data[i] == '.' {
		n.Integer = false
		i++
		if i >= len(data) || !IsDigit(data[i]) {
			return n, errorAt(Syntax, start, "invalid number: missing fraction digits")
		}
		for i < len(data) && IsDigit(data[i]) {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		n.Integer = false
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !IsDigit(data[i]) {
			return n, errorAt(Syntax, start, "invalid number: missing exponent digits")
		}
		for i < len(data) && IsDigit(data[i]) {
			i++
		}
	}
	n.End = i
	return n, nil
}

// IsInteger reports whether v is an integer as JSON writes it
// (-?(0|[1-9][0-9]*)), and nothing else.
func IsInteger(v []byte) bool {
	if len(v) > 0 && v[0] == '-' {
		v = v[1:]
	}
	if len(v) == 0 || (v[0] == '0' && len(v) > 1) {
		return false
	}
	for _, b := range v {
		if !IsDigit(b) {
			return false
		}
	}
	return true
}
