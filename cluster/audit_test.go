package cluster

import "testing"

// TestCommandKinds checks the audit summary of a batch.
func TestCommandKinds(t *testing.T) {
	var cmds [][]byte
	for _, s := range []string{
		`{"v":1,"type":"reserve","key":{}}`, `{"v":1,"type":"complete"}`, `{"v":1,"type":"reserve"}`,
		`{"type":"expire","v":1}`, `not json`, "\xC1\x02", "\xC1\x63",
	} {
		cmds = append(cmds, []byte(s))
	}
	if got := commandKinds(cmds); got != "complete=2 other=3 reserve=2" {
		t.Fatalf("commandKinds = %q", got)
	}
}
