package egress

import (
	"bytes"
	"cmp"
	"encoding/json"
	"html"
	"net/url"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/carmyhq/carmy/internal/jsonscan"
)

// minSecret is the length below which a configured value is not taken
// for a secret by a Redactor: shorter ones ("1", "json", "true") would
// match ordinary text.
const minSecret = 6

// Redacted is what a Redactor puts in place of a secret.
const Redacted = "[redacted]"

// Redactor replaces configured values (header values, a URL's userinfo
// and query values, an MCP server's env values) by "[redacted]" in what
// came back from an upstream or from an error, so that an upstream
// echoing its request does not carry a secret into a record, an answer
// or a log line. It is Carmy's one redactor: HTTP tools (answers, error
// bodies, reconcile probes) and the MCP gateway use it alike. A nil
// *Redactor redacts nothing. It is safe for concurrent use.
//
// Text (Redact) is searched for each value as written and in its
// URL-escaped and common JSON and HTML escaped forms; JSON (RedactJSON)
// is searched in the decoded text of its strings, so that no escaping,
// however unusual, hides a value.
type Redactor struct {
	r *strings.Replacer
	// forms are the texts r replaces (each value and its escaped forms),
	// longest first: what the cheap checks look for; formBytes the same
	// as byte slices.
	forms     []string
	formBytes [][]byte
}

// NewRedactor returns a Redactor of the values given, of those of
// headers, and of the userinfo and query values of u (any may be nil).
// Each value is also redacted in its URL-escaped forms and in the forms
// JSON and HTML encoders commonly give it (`\/` for '/', `\u00e9` for
// 'é', `&amp;` for '&'), and a header value of several words in each
// word after the first ("Bearer <token>": the token). Values shorter than
// six bytes are not redacted; with none left, NewRedactor returns nil.
func NewRedactor(u *url.URL, headers map[string]string, values ...string) *Redactor {
	var secrets []string
	add := func(v string) {
		if len(v) < minSecret {
			return
		}
		secrets = append(secrets, escapings(v)...)
		secrets = append(secrets, url.QueryEscape(v), url.PathEscape(v))
	}
	for _, v := range values {
		add(v)
	}
	for _, v := range headers {
		add(v)
		// "Bearer <token>", "Basic <credentials>": the words after the
		// first, which names a scheme.
		if words := strings.Fields(v); len(words) > 1 {
			for _, w := range words[1:] {
				add(w)
			}
		}
	}
	if u != nil {
		if u.User != nil {
			add(u.User.Username())
			if pw, ok := u.User.Password(); ok {
				add(pw)
			}
			add(u.User.String())
		}
		if u.RawQuery != "" {
			add(u.RawQuery)
			for _, vs := range u.Query() {
				for _, v := range vs {
					add(v)
				}
			}
		}
	}
	if len(secrets) == 0 {
		return nil
	}
	// Longest first, so that a value containing another is replaced whole.
	slices.SortFunc(secrets, func(a, b string) int {
		if c := cmp.Compare(len(b), len(a)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	secrets = slices.Compact(secrets)
	pairs := make([]string, 0, 2*len(secrets))
	formBytes := make([][]byte, 0, len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, Redacted)
		formBytes = append(formBytes, []byte(s))
	}
	return &Redactor{r: strings.NewReplacer(pairs...), forms: secrets, formBytes: formBytes}
}

// escapings returns v and the forms common encoders give it: JSON's
// (encoding/json's, with '<', '>' and '&' escaped, and RFC 8785's), each
// also with '/' written `\/` (PHP's default) and with every non-ASCII
// character as a \u escape (PHP's and Python's defaults), and HTML's.
func escapings(v string) []string {
	var out []string
	for _, e := range []jsonscan.Escaping{jsonscan.Canonical, jsonscan.HTMLSafe} {
		q := jsonscan.AppendString(nil, v, e)
		s := string(q[1 : len(q)-1])
		slashed := strings.ReplaceAll(s, "/", `\/`)
		out = append(out, s, slashed, asciiOnly(s), asciiOnly(slashed))
	}
	return append(out, v, html.EscapeString(v))
}

// asciiOnly returns the JSON string body s with every non-ASCII
// character written as a \u escape (a surrogate pair beyond the BMP).
func asciiOnly(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			writeU(&b, r1)
			writeU(&b, r2)
		default:
			writeU(&b, r)
		}
	}
	return b.String()
}

func writeU(b *strings.Builder, r rune) {
	const hex = "0123456789abcdef"
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(hex[r>>shift&0xF])
	}
}

// Redact returns s with every value of r, and each of its escaped forms,
// replaced by "[redacted]".
func (r *Redactor) Redact(s string) string {
	if r == nil || !r.holds(s) {
		return s
	}
	return r.r.Replace(s)
}

// holds reports whether text holds one of r's values or their forms, as
// written: a check far cheaper than replacing.
func (r *Redactor) holds(text string) bool {
	for _, f := range r.forms {
		if strings.Contains(text, f) {
			return true
		}
	}
	return false
}

// RedactJSON returns the JSON text raw with each of r's values replaced
// by "[redacted]" wherever the decoded text of one of its strings (object
// keys included) holds it, so that a value written with escapes (`\/`,
// `\u0041`) is found as surely as one written plainly. Only the strings
// that held a value are written anew; the rest of raw — its members'
// order, its numbers, its spacing — is kept as it was. changed tells
// whether anything was replaced (when not, raw itself is returned).
//
// raw should be valid JSON; text that is not is redacted as Redact does.
// A text with no backslash and no value of r as written holds none in
// its strings either: it is returned after that check alone.
func (r *Redactor) RedactJSON(raw []byte) (out []byte, changed bool) {
	if r == nil || bytes.IndexByte(raw, '\\') < 0 && !r.holdsBytes(raw) {
		return raw, false
	}
	if !json.Valid(raw) {
		s := r.Redact(string(raw))
		return []byte(s), s != string(raw)
	}
	var buf []byte // a decoded string
	last := 0      // raw[:last] is in out already
	for i := 0; ; {
		j := bytes.IndexByte(raw[i:], '"')
		if j < 0 {
			break
		}
		start := i + j // outside a string, '"' opens one
		end, flags, err := jsonscan.ScanString(raw, start)
		if err != nil { // json.Valid accepted it: not reached
			break
		}
		i = end
		var text string
		switch {
		case flags&(jsonscan.Escaped|jsonscan.BadUTF8) == 0:
			if !r.holdsBytes(raw[start+1 : end-1]) {
				continue
			}
			text = string(raw[start+1 : end-1])
		default:
			if buf, _, err = jsonscan.AppendUnquoted(buf[:0], raw, start); err != nil {
				// Bad UTF-8 or a lone surrogate: decoded as encoding/json
				// does, each into U+FFFD.
				if json.Unmarshal(raw[start:end], &text) != nil {
					continue
				}
			} else {
				text = string(buf)
			}
		}
		red := r.Redact(text)
		if red == text {
			continue
		}
		out = append(out, raw[last:start]...)
		out = jsonscan.AppendString(out, red, jsonscan.Canonical)
		last = end
	}
	if out == nil {
		return raw, false
	}
	return append(out, raw[last:]...), true
}

// holdsBytes is holds of a byte slice.
func (r *Redactor) holdsBytes(b []byte) bool {
	for _, f := range r.formBytes {
		if bytes.Contains(b, f) {
			return true
		}
	}
	return false
}
