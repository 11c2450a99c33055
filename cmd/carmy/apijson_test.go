package main_test

import (
	"encoding/json"
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// apiJSON calls a node's API as token ("" for none) and returns the status
// and the decoded answer.
func apiJSON(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	status, raw := testutil.Do(t, method, url, token, body)
	var out map[string]any
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("%s %s: %d, not a JSON object: %s", method, url, status, raw)
	}
	return status, out
}
