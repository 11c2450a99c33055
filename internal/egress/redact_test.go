package egress

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRedactJSONDecodedStrings: a value is found in the decoded text of
// a JSON string however the upstream escaped it (PHP's `\/`, a \u escape
// of any character, a surrogate pair), in keys as in values; only those
// strings are written anew, the rest of the text kept as it was.
func TestRedactJSONDecodedStrings(t *testing.T) {
	r := NewRedactor(nil, map[string]string{"X-Api-Key": "key/2222", "Authorization": "Bearer tok-é😀-SECRET"})
	for in, want := range map[string]string{
		`{"k":"key/2222"}`:                                `{"k":"[redacted]"}`,
		`{"k":"key\/2222"}`:                               `{"k":"[redacted]"}`,
		`{"k":"\u006bey\u002f2222 and more"}`:             `{"k":"[redacted] and more"}`,
		`{"z": 1.50, "key\/2222": ["a\n", "x"]}`:          `{"z": 1.50, "[redacted]": ["a\n", "x"]}`,
		`{"auth":"Bearer tok-\u00e9\ud83d\ude00-SECRET"}`: `{"auth":"[redacted]"}`,
		`["tok-é😀-SECRET\"quoted\""]`:                     `["[redacted]\"quoted\""]`,
		`{"b":"a\\b","n":12345678}`:                       `{"b":"a\\b","n":12345678}`,
		`"key/222"`:                                       `"key/222"`,
	} {
		got, changed := r.RedactJSON([]byte(in))
		if string(got) != want || changed != (in != want) {
			t.Errorf("RedactJSON(%s) = %s, %v; want %s", in, got, changed, want)
		}
		if !json.Valid(got) {
			t.Errorf("RedactJSON(%s) = %s: not JSON", in, got)
		}
	}
	// Invalid UTF-8 in a string is decoded as encoding/json does.
	if got, _ := r.RedactJSON([]byte("[\"\xff key\\/2222\"]")); strings.Contains(string(got), "2222") {
		t.Errorf("RedactJSON of a string with a bad byte = %q", got)
	}
	// Not JSON: redacted as text.
	if got, changed := r.RedactJSON([]byte(`{"k":"key\/2222"`)); string(got) != `{"k":"[redacted]"` || !changed {
		t.Errorf("RedactJSON of a cut text = %s, %v", got, changed)
	}
	var nilR *Redactor
	if got, changed := nilR.RedactJSON([]byte(`{"k":"key/2222"}`)); string(got) != `{"k":"key/2222"}` || changed {
		t.Errorf("a nil Redactor changed %s", got)
	}
}

// TestRedactJSONUntouched: a text that holds no value is returned itself,
// with or without escapes, and whatever order or spacing it has.
func TestRedactJSONUntouched(t *testing.T) {
	r := NewRedactor(nil, map[string]string{"X-Api-Key": "key/2222"})
	for _, in := range []string{`{"b":1,"a":"x"}`, `{ "b" : "a\/b\u0041" , "a" : [ ] }`} {
		raw := []byte(in)
		got, changed := r.RedactJSON(raw)
		if changed || &got[0] != &raw[0] {
			t.Errorf("RedactJSON(%s) = %s, %v; want the text itself", in, got, changed)
		}
	}
}

// TestRedactTextEscapings: text that is not JSON is searched for each
// value and the forms encoders commonly give it.
func TestRedactTextEscapings(t *testing.T) {
	r := NewRedactor(nil, map[string]string{"X-Api-Key": "k<e>y/&é-2222"})
	for _, form := range []string{
		`k<e>y/&é-2222`,
		`k<e>y\/&é-2222`,
		`k\u003ce\u003ey\/\u0026\u00e9-2222`,
		`k\u003ce\u003ey/\u0026é-2222`,
		`k<e>y\/&\u00e9-2222`,
		`k&lt;e&gt;y/&amp;é-2222`,
		`k%3Ce%3Ey%2F%26%C3%A9-2222`,
	} {
		if got := r.Redact("<p>" + form + "</p>"); got != "<p>[redacted]</p>" {
			t.Errorf("Redact of the form %s = %s", form, got)
		}
	}
}
