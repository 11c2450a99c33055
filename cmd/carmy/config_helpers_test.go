package main

import (
	"os"
	"path/filepath"
	"testing"
)

// writeConfig writes a config file in a fresh temporary directory and
// returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
