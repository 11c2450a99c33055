package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestMarshalNoHTML: the text of an Encoder that escapes no HTML, without
// its newline; '<', '>' and '&' are left as they are, U+2028 and invalid
// UTF-8 escaped as encoding/json escapes them.
func TestMarshalNoHTML(t *testing.T) {
	v := map[string]any{"a<b": "x&y>z\u2028\xff", "n": 1.5, "l": []any{true, nil}}
	got, err := MarshalNoHTML(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a<b":"x&y>z\u2028\ufffd","l":[true,null],"n":1.5}`
	if string(got) != want {
		t.Fatalf("MarshalNoHTML = %s, want %s", got, want)
	}
	if _, err := MarshalNoHTML(func() {}); err == nil {
		t.Fatal("MarshalNoHTML of a func: no error")
	}
}

// FuzzAppendStringNoHTML: NoHTML writes a string as MarshalNoHTML (an
// Encoder with SetEscapeHTML(false)) does.
func FuzzAppendStringNoHTML(f *testing.F) {
	for _, s := range []string{"", "plain", "<a&b>", "\u2028\u2029", "\xff\xfe", "é\x00\x1f\"\\\b\f\n\r\t", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := MarshalNoHTML(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s, NoHTML); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q, NoHTML) = %s, encoding/json %s", s, got, want)
		}
		html, _ := json.Marshal(s)
		if bytes.ContainsAny([]byte(s), "<>&") == bytes.Equal(html, want) {
			t.Fatalf("%q: with HTML escapes %s, without %s", s, html, want)
		}
	})
}
