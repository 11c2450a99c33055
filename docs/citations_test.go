package docs

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoOutsideContractCited: no file of the repository cites the
// contract document the project keeps outside it: the word SPEC, before a
// section number, in "SPEC.md" or in "a SPEC code". A newcomer cannot
// follow such a citation: the rule must be pointed at on a page of docs/
// instead (docs/errors.md, docs/api.md#executions, …), and stated there.
// This file is the one exception, as it names what it looks for.
func TestNoOutsideContractCited(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	cited := regexp.MustCompile(`\bSPEC\b`)
	self := filepath.Join("docs", "citations_test.go")
	for _, name := range trackedFiles(t, root) {
		if name == self {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range bytes.Split(data, []byte("\n")) {
			if cited.Match(line) {
				t.Errorf("%s:%d cites the contract kept outside the repository; point at the docs/ page that states the rule instead: %s",
					name, i+1, strings.TrimSpace(string(line)))
			}
		}
	}
}

// TestDocsAnchorsExist: every docs/PAGE.md#anchor a file of the
// repository points at, and every (PAGE.md#anchor) link between the pages
// of docs/, names a heading of that page (anchors as GitHub makes them:
// lower case, punctuation dropped, spaces as hyphens), so that a heading
// renamed does not leave the comments that point at it pointing nowhere.
func TestDocsAnchorsExist(t *testing.T) {
	root := repoRoot(t)
	anchors := map[string]map[string]bool{}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		anchors[filepath.Base(p)] = headingAnchors(string(data))
	}
	anywhere := regexp.MustCompile(`docs/([a-z]+\.md)#([\w-]+)`)
	inDocs := regexp.MustCompile(`\]\(([a-z]+\.md)#([\w-]+)\)`)
	for _, name := range trackedFiles(t, root) {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		refs := anywhere.FindAllStringSubmatch(string(data), -1)
		if filepath.Dir(name) == "docs" {
			refs = append(refs, inDocs.FindAllStringSubmatch(string(data), -1)...)
		}
		for _, r := range refs {
			page, anchor := r[1], r[2]
			if have, ok := anchors[page]; ok && !have[anchor] {
				t.Errorf("%s points at %s#%s, which is no heading of docs/%s", name, page, anchor, page)
			}
		}
	}
}

// headingAnchors returns the anchors of the Markdown headings of page,
// outside code blocks.
func headingAnchors(page string) map[string]bool {
	drop := regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	anchors := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		heading := strings.TrimLeft(line, "#")
		if fenced || len(heading) == len(line) || len(line)-len(heading) > 6 || !strings.HasPrefix(heading, " ") {
			continue
		}
		a := drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), "")
		anchors[strings.ReplaceAll(a, " ", "-")] = true
	}
	return anchors
}

// repoRoot returns the repository's top directory (this package's parent).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// trackedFiles returns the paths, relative to root, of the files git
// tracks there; without git (a source tree exported from it), every
// regular file under root but those in .git.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		var names []string
		for _, n := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			if n == "" {
				continue
			}
			// A file deleted but not yet staged is still listed.
			if fi, err := os.Lstat(filepath.Join(root, n)); err == nil && fi.Mode().IsRegular() {
				names = append(names, filepath.FromSlash(n))
			}
		}
		return names
	}
	var names []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			names = append(names, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
