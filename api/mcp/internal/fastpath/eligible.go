package fastpath

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/carmyhq/carmy/internal/mcpversion"
)

// The checks the SDK's Streamable HTTP handler makes of a request before
// it reads the body, with the SDK's own rules. Two are exported, Accepts
// and IsJSONType: package api/mcp applies the same rules to the requests
// it answers itself (batches, tasks, progress, its streams), so that one
// copy of each rule is kept.

// eligible reports whether r passes the checks the SDK's handler makes
// before it reads the body, with the SDK's own rules, for a version the
// fast path serves. checkHost is the SDK's localhost protection, on.
func eligible(r *http.Request, checkHost bool) bool {
	if checkHost {
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil &&
			isLoopback(local.String()) && !isLoopback(r.Host) {
			return false
		}
	}
	if f, ok := mcpversion.Lookup(r.Header.Get("Mcp-Protocol-Version")); !ok || !f.FastPath || r.Method != http.MethodPost {
		return false
	}
	if !IsJSONType(r.Header.Get("Content-Type")) {
		return false
	}
	if jsonOK, streamOK := Accepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		return false
	}
	return len(r.Header.Values("Last-Event-ID")) == 0 && r.Body != nil
}

// IsJSONType reports whether a Content-Type is application/json, as
// mime.ParseMediaType reads it (parameters allowed), as the SDK reads
// it; the plain value without parsing.
func IsJSONType(contentType string) bool {
	if contentType == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// Accepts is the SDK's streamableAccepts: whether the Accept header's
// values admit JSON and an event stream.
func Accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for rest, more := value, true; more; {
			var raw string
			raw, rest, more = strings.Cut(rest, ",")
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// isLoopback is the SDK's check of a loopback address or Host.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
