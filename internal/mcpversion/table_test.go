package mcpversion

import (
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSupportedIsTheSDKs: Carmy serves exactly the versions of the SDK it
// is built on, and Latest is the SDK's newest.
func TestSupportedIsTheSDKs(t *testing.T) {
	if got, want := Supported(), mcp.SupportedProtocolVersions(); !slices.Equal(got, want) {
		t.Fatalf("Supported() = %v, the SDK's %v", got, want)
	}
	if Supported()[0] != Latest {
		t.Fatalf("Latest = %s, want the newest, %s", Latest, Supported()[0])
	}
	if !slices.IsSortedFunc(table, func(a, b Features) int { return strings.Compare(a.Version, b.Version) }) {
		t.Fatal("table is not oldest first")
	}
}

// TestFor: a version of the table reads as itself, "" as Unstated, a
// newer unknown version as the newest one before it, an older one as
// nothing.
func TestFor(t *testing.T) {
	for _, tc := range []struct{ v, want string }{
		{V20250618, V20250618},
		{"", Unstated},
		{"2026-01-01", V20251125},
		{"2099-01-01", Latest},
		{"2020-01-01", ""},
	} {
		if got := For(tc.v).Version; got != tc.want {
			t.Errorf("For(%q).Version = %q, want %q", tc.v, got, tc.want)
		}
	}
	if f, ok := Lookup("2026-01-01"); ok {
		t.Errorf("Lookup of a version not in the table = %+v, true", f)
	}
	if f, ok := Lookup(""); !ok || f.Version != Unstated {
		t.Errorf(`Lookup("") = %+v, %v; want %s`, f, ok, Unstated)
	}
}

// TestFeatureRanges: batches end where the fast path begins, the two
// kinds of tasks never overlap, and the stateless versions are those at
// which a closed stream cancels.
func TestFeatureRanges(t *testing.T) {
	if got := First(func(f Features) bool { return !f.Batches }); got != V20250618 {
		t.Errorf("the first version without batches = %s, want %s", got, V20250618)
	}
	for _, f := range table {
		if f.Batches == f.FastPath {
			t.Errorf("%s: batches %v, fast path %v", f.Version, f.Batches, f.FastPath)
		}
		if f.TasksCore && f.TasksExtension {
			t.Errorf("%s: both kinds of tasks", f.Version)
		}
		if f.Stateless != f.ClosedStreamCancels {
			t.Errorf("%s: stateless %v, closed stream cancels %v", f.Version, f.Stateless, f.ClosedStreamCancels)
		}
	}
	if got := Versions(func(f Features) bool { return f.FastPath }); !slices.Equal(got, []string{V20260728, V20251125, V20250618}) {
		t.Errorf("fast path versions = %v", got)
	}
}
