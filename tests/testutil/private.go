package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// AssertPrivate fails tb for every directory or file under dir (dir
// included) that its group or others may read, write or enter, and returns
// the paths it checked, relative to dir. A path that disappears while it
// walks (a snapshot reaped) is skipped, and so is a snapshot still being
// written (a ".tmp" directory of Raft's, made private when it closes).
func AssertPrivate(tb testing.TB, dir string) []string {
	tb.Helper()
	var checked []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if strings.HasSuffix(rel, ".tmp") || strings.HasSuffix(filepath.Dir(rel), ".tmp") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		checked = append(checked, rel)
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			tb.Errorf("%s is mode %v: other users may read it", rel, perm)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return checked
}
