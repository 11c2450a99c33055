package jsonscan

// ArrayElements appends to dst the elements of the array data holds, in
// order, when data is one JSON array that [Valid] accepts; else it
// returns dst and false. Elements alias data and are given as written,
// without the space around them.
func ArrayElements(dst [][]byte, data []byte) ([][]byte, bool) {
	base := len(dst)
	i := SkipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return dst, false
	}
	i = SkipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return dst, SkipSpace(data, i+1) == len(data)
	}
	for {
		end, err := scanValue(data, i, 1)
		if err != nil {
			return dst[:base], false
		}
		dst = append(dst, data[i:end])
		if i = SkipSpace(data, end); i >= len(data) {
			return dst[:base], false
		}
		switch data[i] {
		case ',':
			i = SkipSpace(data, i+1)
		case ']':
			if SkipSpace(data, i+1) != len(data) {
				return dst[:base], false
			}
			return dst, true
		default:
			return dst[:base], false
		}
	}
}
