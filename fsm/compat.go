package fsm

// The readers of older forms this build keeps (docs/design.md,
// "Compatibility"). Each names the form, who wrote it, and when it goes.

// peekJSONType returns the type of a command in the JSON form of builds
// before the binary codec, for PeekType (audit logs and metrics) only:
// Decode refuses that form, so nothing applies it. No release wrote it,
// so nothing needs this; it stays only while cluster's TestCommandKinds
// still feeds PeekType JSON commands, and is deleted, with this file, when
// that test is changed.
func peekJSONType(data []byte) (t Type, ok bool) {
	const prefix = `{"v":1,"type":"`
	if len(data) > len(prefix) && string(data[:len(prefix)]) == prefix {
		rest := data[len(prefix):]
		for i := 0; i < len(rest) && i <= 32; i++ {
			if rest[i] == '"' {
				return Type(rest[:i]), i > 0
			}
		}
	}
	return "", false
}
