package jsonscan

// IsSpace reports whether c is one of JSON's four whitespace characters.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the index of the first byte of data from i on that is
// not JSON whitespace (len(data) when there is none).
func SkipSpace(data []byte, i int) int {
	for i < len(data) && IsSpace(data[i]) {
		i++
	}
	return i
}

// ScanLiteral checks that data[i:] begins with lit (true, false or null)
// and returns the index after it.
func ScanLiteral(data []byte, i int, lit string) (int, error) {
	end := i + len(lit)
	if end > len(data) || string(data[i:end]) != lit {
		return i, errorAt(Syntax, i, "invalid literal")
	}
	return end, nil
}
