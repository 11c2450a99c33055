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

// TestCommandKindsOfOne checks the summary of a batch of one command,
// most forwarded batches under load.
func TestCommandKindsOfOne(t *testing.T) {
	for cmd, want := range map[string]string{"\xC3\x01": "reserve=1", "\xC3\x02\x00": "complete=1", "not json": "other=1"} {
		if got := commandKinds([][]byte{[]byte(cmd)}); got != want {
			t.Errorf("commandKinds(%q) = %q, want %q", cmd, got, want)
		}
	}
}

// TestCommandKindsAllocatesItsTextOnly pins the summary's cost: the
// leader writes one for every forwarded batch, so only its text is
// allocated, whatever the batch holds.
func TestCommandKindsAllocatesItsTextOnly(t *testing.T) {
	for _, cmds := range [][][]byte{
		{[]byte("\xC3\x01")},
		{[]byte("\xC3\x01"), []byte("\xC3\x02\x00"), []byte("not json"), []byte("\xC3\x01")},
	} {
		if n := testing.AllocsPerRun(100, func() { commandKinds(cmds) }); n > 1 {
			t.Errorf("commandKinds of %d commands: %v allocations, want 1", len(cmds), n)
		}
	}
}
