package api

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
)

// strictQuery is Pre middleware that refuses, with 400 INVALID_REQUEST
// naming the parameter (or "query"), a query string net/http would read
// other than as it was written: a pair with a ';' (url.ParseQuery drops the
// whole pair since Go 1.17, so ?request_id=a;b would silently become a
// listing instead of a lookup), a malformed %-escape (the pair is dropped
// too), or a name given twice (one handler would take the first, a proxy
// in front the last). A ';' escaped as %3B is data. The node-to-node
// endpoints under /internal/ are left to their own checks.
func strictQuery(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.URL.RawQuery != "" && !strings.HasPrefix(r.URL.Path, "/internal/") {
			if err := checkQuery(r.URL.RawQuery); err != nil {
				return err
			}
		}
		return next(c)
	}
}

// checkQuery returns the INVALID_REQUEST of the first pair of raw that
// url.ParseQuery would drop or that repeats a name, nil when there is
// none.
func checkQuery(raw string) error {
	var seen map[string]bool
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		if i := strings.IndexByte(pair, ';'); i >= 0 {
			name := pair[:i]
			if j := strings.IndexByte(name, '='); j >= 0 {
				name = name[:j]
			}
			return invalidField(paramName(name), fmt.Sprintf("the query string has a ';' in %q: separate parameters with '&', and escape a ';' in a value as %%3B", pair))
		}
		rawName, rawValue, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil {
			return invalidField("query", fmt.Sprintf("the query string has a malformed %%-escape in the name of %q", pair))
		}
		if _, err := url.QueryUnescape(rawValue); err != nil {
			return invalidField(name, fmt.Sprintf("query parameter %q has a malformed %%-escape", name))
		}
		if seen[name] {
			return invalidField(name, fmt.Sprintf("query parameter %q is given more than once", name))
		}
		if seen == nil {
			seen = make(map[string]bool)
		}
		seen[name] = true
	}
	return nil
}

// paramName is the field naming a parameter at fault: its name unescaped,
// or "query" when it has none or it does not unescape.
func paramName(raw string) string {
	name, err := url.QueryUnescape(raw)
	if err != nil || name == "" {
		return "query"
	}
	return name
}
