package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// explainYAML turns the YAML decoder's error for the config file raw into
// one a person can act on: the line where the file stops being valid YAML
// (the parser names the line its enclosing block began on, often line 1),
// and an unknown key by its name, with the nearest known one.
func explainYAML(raw []byte, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			msgs[i] = explainField(e)
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	if line := firstBadLine(raw); line > 0 {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if i := strings.Index(msg, ": "); strings.HasPrefix(msg, "line ") && i > 0 {
			msg = msg[i+2:]
		}
		return fmt.Errorf("line %d: %s (check that line's indentation: YAML nests by spaces, and items of one list or keys of one map line up)", line, msg)
	}
	return err
}

// firstBadLine returns the first line n such that the first n lines of raw
// are not valid YAML, or 0. A config file is short: decoding its prefixes
// one by one costs nothing worth saving.
func firstBadLine(raw []byte) int {
	lines := bytes.SplitAfter(raw, []byte("\n"))
	for n := 1; n <= len(lines); n++ {
		var v any
		if err := yaml.Unmarshal(bytes.Join(lines[:n], nil), &v); err != nil && !errors.Is(err, io.EOF) {
			return n
		}
	}
	return 0
}

var unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)

// explainField rewrites the decoder's "field X not found in type T".
func explainField(e string) string {
	m := unknownField.FindStringSubmatch(e)
	if m == nil {
		return e
	}
	msg := fmt.Sprintf("line %s: unknown key %q", m[1], m[2])
	if near := nearestKey(m[2]); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return msg + "; docs/config.md lists every key"
}

// nearestKey returns the key of the config file nearest to k (at most two
// edits away), or "".
func nearestKey(k string) string {
	best, bestD := "", 3
	for _, c := range configKeys() {
		if d := editDistance(strings.ToLower(k), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// configKeys returns every yaml key of fileConfig, at any depth.
func configKeys() []string {
	var keys []string
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
				keys = append(keys, name)
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[fileConfig]())
	return keys
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
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
