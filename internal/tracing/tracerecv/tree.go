package tracerecv

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/carmyhq/carmy/internal/tracing/otlpread"
)

// WriteTree writes t as an indented tree of its spans, for a person to
// read: a line naming the trace, then one line per span (children under
// their parent, by start time) with its name, duration, kind, the
// attributes whose key starts with one of attrPrefixes (all of them when
// none is given) and its status when set. A span whose parent is not in
// t (the caller's, in another process) is a root, marked "parent …".
func WriteTree(w io.Writer, t Trace, attrPrefixes ...string) error {
	byID := make(map[otlpread.SpanID]bool, len(t.Spans))
	for _, s := range t.Spans {
		byID[s.SpanID] = true
	}
	children := map[otlpread.SpanID][]Span{}
	var roots []Span
	for _, s := range t.Spans {
		if s.ParentSpanID.IsZero() || !byID[s.ParentSpanID] || s.ParentSpanID == s.SpanID {
			roots = append(roots, s)
		} else {
			children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
		}
	}
	byStart := func(a, b Span) int {
		return cmp.Or(cmp.Compare(a.StartUnixNano, b.StartUnixNano), strings.Compare(a.Name, b.Name))
	}
	slices.SortStableFunc(roots, byStart)
	for _, c := range children {
		slices.SortStableFunc(c, byStart)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s  %s, %d spans, %s\n", t.ID, serviceNames(t), len(t.Spans), duration(traceSpan(t)))
	seen := map[otlpread.SpanID]bool{}
	var walk func(s Span, indent, branch string)
	walk = func(s Span, indent, branch string) {
		if seen[s.SpanID] { // a span id given twice, or a cycle: print it once
			return
		}
		seen[s.SpanID] = true
		b.WriteString(indent + branch + spanLine(s, byID, attrPrefixes) + "\n")
		next := indent
		switch branch {
		case "├─ ":
			next += "│  "
		case "└─ ":
			next += "   "
		}
		kids := children[s.SpanID]
		for i, c := range kids {
			br := "├─ "
			if i == len(kids)-1 {
				br = "└─ "
			}
			walk(c, next, br)
		}
	}
	for _, r := range roots {
		walk(r, "  ", "")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// spanLine is one span's line of the tree.
func spanLine(s Span, present map[otlpread.SpanID]bool, prefixes []string) string {
	parts := []string{s.Name, duration(time.Duration(s.EndUnixNano - s.StartUnixNano))}
	if s.EndUnixNano < s.StartUnixNano {
		parts[1] = "?"
	}
	parts = append(parts, s.Kind.String())
	for _, kv := range s.Attributes {
		if len(prefixes) == 0 || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(kv.Key, p) }) {
			parts = append(parts, kv.Key+"="+quoteIfNeeded(kv.Value.String()))
		}
	}
	if s.Status.Code != otlpread.StatusUnset {
		st := "status=" + s.Status.Code.String()
		if s.Status.Message != "" {
			st += " " + quoteIfNeeded(s.Status.Message)
		}
		parts = append(parts, st)
	}
	if !s.ParentSpanID.IsZero() && !present[s.ParentSpanID] {
		parts = append(parts, "parent "+s.ParentSpanID.String())
	}
	return strings.Join(parts, "  ")
}

// quoteIfNeeded quotes v when it is empty or holds a space or a control
// character, so that a line stays one line.
func quoteIfNeeded(v string) string {
	if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == '"' || r == 0x7f }) {
		return fmt.Sprintf("%q", v)
	}
	return v
}

// duration rounds d for reading: to the microsecond under a second, to
// the millisecond above.
func duration(d time.Duration) string {
	if d >= time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// traceSpan is the time from t's first span's start to its last span's
// end.
func traceSpan(t Trace) time.Duration {
	var start, end uint64
	for i, s := range t.Spans {
		if i == 0 || s.StartUnixNano < start {
			start = s.StartUnixNano
		}
		end = max(end, s.EndUnixNano)
	}
	if end < start {
		return 0
	}
	return time.Duration(end - start)
}

// serviceNames lists the service.name of t's resources, "unknown_service"
// for one without.
func serviceNames(t Trace) string {
	var names []string
	for _, s := range t.Spans {
		if n := serviceName(s.Resource); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// serviceName returns the service.name of a resource, as OpenTelemetry
// defaults it when absent.
func serviceName(resource []otlpread.KeyValue) string {
	if v, ok := otlpread.Lookup(resource, "service.name"); ok && v.String() != "" {
		return v.String()
	}
	return "unknown_service"
}
