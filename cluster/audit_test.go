package cluster

import "testing"

// TestCommandKinds checks the audit summary of a batch.
func TestCommandKinds(t *testing.T) {
	var cmds [][]byte
	for _, s := range []string{
		"\xC3\x01", "\xC3\x01\x05", "\xC3\x02", "\xC3\x02\x00",
		`{"v":1,"type":"reserve"}`, `not json`, "\xC3\x63", // the JSON form of unreleased builds is no command
	} {
		cmds = append(cmds, []byte(s))
	}
	if got := commandKinds(cmds); got != "complete=2 other=3 reserve=2" {
		t.Fatalf("commandKinds = %q", got)
	}
}
