package engine_test

import (
	"strings"
	"testing"
)

// buildTags are the build configurations the layout is checked under: the
// default build, and the binary with the test fault layer compiled in.
var buildTags = []string{"", "carmyfaults"}

// projectImports returns, for every package matching pattern, the project
// packages its non-test files import under tags (standard library and
// third-party imports left out), as "importer>imported" pairs.
func projectImports(t *testing.T, tags, pattern string) [][2]string {
	t.Helper()
	out := goList(t, "-tags="+tags, "-f",
		`{{$p := .ImportPath}}{{range .Imports}}{{$p}}>{{.}} {{end}}`, pattern)
	var pairs [][2]string
	for _, line := range out {
		from, to, ok := strings.Cut(line, ">")
		if !ok {
			t.Fatalf("go list printed %q, want importer>imported", line)
		}
		if to == module || strings.HasPrefix(to, module+"/") {
			pairs = append(pairs, [2]string{from, to})
		}
	}
	return pairs
}

// TestLayoutInternalLeaves checks that internal/ holds leaves only: a
// package under internal/ imports the standard library, third-party
// modules and other packages under internal/, never a project package
// above it (store, engine, api, cluster, the harnesses under tests/ …),
// so that no dependency arrow runs back up through internal/. Test files
// are not checked: a leaf's tests may run a whole node.
func TestLayoutInternalLeaves(t *testing.T) {
	t.Parallel()
	internal := module + "/internal/"
	for _, tags := range buildTags {
		pairs := projectImports(t, tags, module+"/internal/...")
		if len(pairs) == 0 {
			t.Fatalf("tags %q: no package under internal/ imports another; is the pattern right?", tags)
		}
		for _, p := range pairs {
			if !strings.HasPrefix(p[1], internal) {
				t.Errorf("tags %q: %s imports %s, which is not under internal/", tags, p[0], p[1])
			}
		}
	}
}

// TestLayoutProductImportsNoTests checks that the harnesses under tests/
// are only ever imported by tests: no package outside tests/ imports one
// from its non-test files (its _test.go files may).
func TestLayoutProductImportsNoTests(t *testing.T) {
	t.Parallel()
	harness := module + "/tests/"
	for _, tags := range buildTags {
		pairs := projectImports(t, tags, module+"/...")
		seen := false
		for _, p := range pairs {
			if !strings.HasPrefix(p[1], harness) {
				continue
			}
			if strings.HasPrefix(p[0], harness) {
				seen = true // a harness building on another: allowed
				continue
			}
			t.Errorf("tags %q: %s imports the test harness %s outside its tests", tags, p[0], p[1])
		}
		if !seen {
			t.Fatalf("tags %q: no harness under tests/ imports another; is the pattern right?", tags)
		}
	}
}
