// Package didyoumean finds the word a person meant: the nearest of the
// known ones by edit distance, for a mistyped flag or config key.
// Standard library only.
package didyoumean

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// Nearest returns the candidate nearest to word (case-insensitively), if
// it is at most maxEdits edits away; else "". Ties go to the first.
func Nearest(word string, candidates []string, maxEdits int) string {
	best, bestD := "", maxEdits+1
	for _, c := range candidates {
		if d := Distance(strings.ToLower(word), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// FlagError words an error of fs.Parse for a person: an undefined flag
// as "unknown flag --name", with the nearest flag of fs when one is at
// most two edits away ("did you mean --http-addr?"); any other error as
// the flag package gives it. fs's own output should be io.Discard, so
// that the flag package prints nothing of its own.
func FlagError(err error, fs *flag.FlagSet) string {
	const undefined = "flag provided but not defined: "
	msg := err.Error()
	if !strings.HasPrefix(msg, undefined) || errors.Is(err, flag.ErrHelp) {
		return msg
	}
	name := strings.TrimLeft(strings.TrimPrefix(msg, undefined), "-")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	out := fmt.Sprintf("unknown flag --%s", name)
	if near := Nearest(name, names, 2); near != "" {
		out += fmt.Sprintf(" (did you mean --%s?)", near)
	}
	return out
}
