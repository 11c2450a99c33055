package jcs_test

import (
	"testing"

	"github.com/carmyhq/carmy/store/jcs"
)

func canon(t *testing.T, in string) string {
	t.Helper()
	out, err := jcs.AppendCanonical(nil, []byte(in))
	if err != nil {
		t.Fatalf("Canonicalize(%q): %v", in, err)
	}
	return string(out)
}

// TestRFCStructuredExample is the example of RFC 8785 section 3.2.2.
func TestRFCStructuredExample(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	if got := canon(t, in); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestRFCSortingExample is the example of RFC 8785 section 3.2.3.
func TestRFCSortingExample(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := `{"\r":"Carriage Return",` +
		`"1":"One",` +
		"\"\u0080\":\"Control\"," +
		"\"\u00f6\":\"Latin Small Letter O With Diaeresis\"," +
		"\"\u20ac\":\"Euro Sign\"," +
		"\"\U0001F600\":\"Emoji: Grinning Face\"," +
		"\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	if got := canon(t, in); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestUTF16Order(t *testing.T) {
	// 😀 (U+1F600, first code unit 0xD83D) sorts before U+E000..U+FFFF
	// in UTF-16 order, although it sorts after them by code point and by
	// UTF-8 bytes.
	tests := []struct{ in, want string }{
		{`{"\u20ac":1,"\ud83d\ude00":2}`, `{"€":1,"😀":2}`},
		{`{"\uffff":1,"\ud83d\ude00":2}`, "{\"😀\":2,\"\uffff\":1}"},
		{`{"\ue000":1,"\ud800\udc00":2}`, "{\"\U00010000\":2,\"\ue000\":1}"},
		{`{"\ud7ff":1,"\ud800\udc00":2}`, "{\"\ud7ff\":1,\"\U00010000\":2}"},
		{`{"\ud83d\ude01":1,"\ud83d\ude00":2}`, `{"😀":2,"😁":1}`},
		{`{"a\uffff":1,"a\ud83d\ude00":2,"a":3,"":4}`, "{\"\":4,\"a\":3,\"a😀\":2,\"a\uffff\":1}"},
		{`{"b":1,"a":2,"aa":3,"A":4}`, `{"A":4,"a":2,"aa":3,"b":1}`},
	}
	for _, tc := range tests {
		if got := canon(t, tc.in); got != tc.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestStrings(t *testing.T) {
	tests := []struct{ in, want string }{
		{`""`, `""`},
		{`"abc"`, `"abc"`},
		{`"\/"`, `"/"`},
		{`"/"`, `"/"`},
		{`"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{`"\u0008\u000C\u000a\u000D\u0009"`, `"\b\f\n\r\t"`},
		{`"\u0000\u0001\u001f\u001F"`, `"\u0000\u0001\u001f\u001f"`},
		{`"\u0020\u007f"`, "\" \x7f\""},
		{`"\u0022\u005C"`, `"\"\\"`},
		{`"\u00e9\u2028\u2029"`, "\"é\u2028\u2029\""},
		{"\"é\u2028\x7f\"", "\"é\u2028\x7f\""},
		{`"\uD83D\uDE00"`, `"😀"`},
		{`"😀"`, `"😀"`},
		{`"\ufffe\uffff"`, "\"\ufffe\uffff\""},
		{`"<>&'"`, `"<>&'"`},
	}
	for _, tc := range tests {
		if got := canon(t, tc.in); got != tc.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestStructure(t *testing.T) {
	tests := []struct{ in, want string }{
		{`true`, `true`},
		{` false `, `false`},
		{"\t\r\n null \n", `null`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{`[ ]`, `[]`},
		{`{ }`, `{}`},
		{`[1, [2, [3, {}]], {"a": []}]`, `[1,[2,[3,{}]],{"a":[]}]`},
		{`{"b": {"d": 1, "c": 2}, "a": [{"z": 0, "y": null}]}`, `{"a":[{"y":null,"z":0}],"b":{"c":2,"d":1}}`},
		// Nested objects at the same depth must not share state.
		{`[{"b":1,"a":2},{"d":3,"c":4}]`, `[{"a":2,"b":1},{"c":4,"d":3}]`},
		{`{"x":{"b":{"q":1,"p":2},"a":0},"w":{"b":1,"a":2}}`, `{"w":{"a":2,"b":1},"x":{"a":0,"b":{"p":2,"q":1}}}`},
	}
	for _, tc := range tests {
		if got := canon(t, tc.in); got != tc.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestInvariance(t *testing.T) {
	variants := []string{
		`{"a":1,"b":[true,null],"c":{"x":"y","w":2.50}}`,
		`{"c":{"w":2.5,"x":"y"},"b":[true,null],"a":1}`,
		" { \"b\" : [ true , null ] ,\n\t\"a\" : 1.0 , \"c\" : { \"x\" : \"\\u0079\" , \"w\" : 25e-1 } } ",
		`{"a":10e-1,"c":{"w":0.25E1,"x":"y"},"b":[true,null]}`,
	}
	want := `{"a":1,"b":[true,null],"c":{"w":2.5,"x":"y"}}`
	for _, in := range variants {
		if got := canon(t, in); got != want {
			t.Errorf("Canonicalize(%s) = %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{"1", "1.0", "1e0", "10e-1", "0.1E1", "1.000000000000000000001"} {
		if got := canon(t, in); got != "1" {
			t.Errorf("Canonicalize(%s) = %s, want 1", in, got)
		}
	}
}

func TestDistinctValuesDistinctOutput(t *testing.T) {
	inputs := []string{
		`1`, `2`, `-1`, `1.5`, `"1"`, `true`, `false`, `null`, `[]`, `{}`,
		`[1]`, `[1,2]`, `[2,1]`, `{"a":1}`, `{"a":2}`, `{"b":1}`, `{"a":1,"b":1}`,
		`""`, `" "`, `"a"`, `"A"`, `["a"]`, `{"a":[]}`, `{"a":{}}`, `[null]`,
		`0.1`, `0.10000000000000002`, `9007199254740992`, `9007199254740994`,
	}
	seen := map[string]string{}
	for _, in := range inputs {
		out := canon(t, in)
		if prev, ok := seen[out]; ok {
			t.Errorf("%s and %s both canonicalise to %s", prev, in, out)
		}
		seen[out] = in
	}
}

func TestAppendCanonical(t *testing.T) {
	dst := []byte("prefix:")
	out, err := jcs.AppendCanonical(dst, []byte(`{"b":1,"a":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `prefix:{"a":2,"b":1}` {
		t.Errorf("got %s", out)
	}
	out, err = jcs.AppendCanonical(dst, []byte(`{"b":1,"a":}`))
	if err == nil {
		t.Fatal("expected error")
	}
	if string(out) != "prefix:" {
		t.Errorf("on error got %q, want original dst", out)
	}
	if out, err := jcs.AppendCanonical(nil, []byte(`[`)); err == nil || out != nil {
		t.Errorf("Canonicalize on error = %q, %v; want nil, error", out, err)
	}
}

func TestMaxDepthAccepted(t *testing.T) {
	in := make([]byte, 0, 2*jcs.MaxDepth)
	for range jcs.MaxDepth / 2 {
		in = append(in, `[{"k":`...)
	}
	in = append(in, '0')
	for range jcs.MaxDepth / 2 {
		in = append(in, "}]"...)
	}
	out, err := jcs.AppendCanonical(nil, in)
	if err != nil {
		t.Fatalf("depth %d: %v", jcs.MaxDepth, err)
	}
	if string(out) != string(in) {
		t.Errorf("deep value not preserved")
	}
}
