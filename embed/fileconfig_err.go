package embed

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/carmyhq/carmy/internal/didyoumean"
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
			msgs[i] = explainField(raw, e)
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

var (
	unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	wrongType    = regexp.MustCompile("^line (\\d+): cannot unmarshal !!\\w+ `(.*)` into (\\S+)$")
)

// wantOfType says how a value of a scalar Go type is written in the file;
// the decoder's own words stay for the others (lists, maps).
var wantOfType = map[string]string{
	"bool": "true or false", "int": "a whole number", "int64": "a whole number", "uint64": "a whole number",
	"float64": "a number", "string": "a string",
}

// explainField rewrites the decoder's "field X not found in type T" and
// "cannot unmarshal !!str `v` into T" of the config file raw, naming the
// key and what its value should be.
func explainField(raw []byte, e string) string {
	if m := wrongType.FindStringSubmatch(e); m != nil && wantOfType[m[3]] != "" {
		line, _ := strconv.Atoi(m[1])
		want := wantOfType[m[3]]
		if key := keyOnLine(raw, line); key != "" {
			return fmt.Sprintf("line %d: %s: %q is not valid here: want %s", line, key, m[2], want)
		}
		return fmt.Sprintf("line %d: %q is not valid here: want %s", line, m[2], want)
	}
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
	return didyoumean.Nearest(k, configKeys(), 2)
}

// keyOnLine returns the key that line n (from 1) of raw sets, or "".
func keyOnLine(raw []byte, n int) string {
	lines := strings.Split(string(raw), "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	l := strings.TrimLeft(strings.TrimSpace(lines[n-1]), "- ")
	key, _, ok := strings.Cut(l, ":")
	if !ok || strings.ContainsAny(key, " \"'{[") {
		return ""
	}
	return key
}

// configKeys returns every yaml key of FileConfig, at any depth.
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
	walk(reflect.TypeFor[FileConfig]())
	return keys
}
