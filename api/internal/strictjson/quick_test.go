package strictjson

import (
	"strings"
	"testing"

	"github.com/carmyhq/carmy/internal/jsonscan"
	"github.com/carmyhq/carmy/store/jcs"
)

// quickCases are values with Quick's verdict: true for what it judges at
// a glance, false for what it leaves to Check (refused or not).
var quickCases = []struct {
	value string
	quick bool
}{
	{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"payload":"x"},"_meta":{"carmy/request_id":"r-1"}}}`, true},
	{` [1, -2, 3.5e10, 0.25, -0, true, false, null, "a\"b\\c\n\u00e9\ud83d\ude00"] `, true},
	{`{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}`, true},
	{`"héllo"`, true},
	{`1e308`, false},                         // finite, but at Quick's limit
	{`1e-400`, true},                         // rounds to zero: no error
	{`123456789012345678901234567890`, true}, // more than 15 digits, within range
	{`{"a":1,"a":2}`, false},                 // repeated
	{`{"a":{"b":1,"b":2}}`, false},           // repeated, nested
	{`{"a":1,"\u0061":2}`, false},            // an escaped name: Check decides (repeated)
	{`{"\u0062":1}`, false},                  // an escaped name: Check decides (fine)
	{`"\ud800"`, false},                      // lone high surrogate
	{`"\udc00"`, false},                      // lone low surrogate
	{`"\ud800\u0041"`, false},                // high surrogate, then no low one
	{"\"\xff\"", false},                      // invalid UTF-8
	{`1e400`, false},                         // out of range
	{`{"a":1}x`, false},                      // trailing data
	{`{"a":1,}`, false},                      // syntax
	{``, false},                              // nothing
	{strings.Repeat("[", 64) + strings.Repeat("]", 64), true},
	{strings.Repeat("[", 65) + strings.Repeat("]", 65), false}, // deeper than Quick looks
}

func TestQuick(t *testing.T) {
	for _, c := range quickCases {
		if got := Quick([]byte(c.value)); got != c.quick {
			t.Errorf("Quick(%q) = %v, want %v", c.value, got, c.quick)
		}
		checkQuick(t, []byte(c.value))
	}
}

// checkQuick fails when Quick accepts value and jsonscan.Valid or jcs
// refuses it.
func checkQuick(t *testing.T, value []byte) {
	t.Helper()
	if !Quick(value) {
		return
	}
	if !jsonscan.Valid(value) {
		t.Errorf("Quick accepts %q, which is not valid JSON", value)
	}
	if _, err := jcs.AppendCanonical(nil, value); err != nil {
		t.Errorf("Quick accepts %q, which jcs refuses: %v", value, err)
	}
}

func TestQuickAllocatesNothing(t *testing.T) {
	body := []byte(quickCases[0].value)
	if n := testing.AllocsPerRun(100, func() { Quick(body) }); n != 0 {
		t.Errorf("Quick allocates %v times a call", n)
	}
}

// FuzzQuick holds Quick to its promise: what it accepts, jsonscan.Valid
// and jcs accept.
func FuzzQuick(f *testing.F) {
	for _, c := range quickCases {
		f.Add([]byte(c.value))
	}
	f.Add([]byte(`{"a":[1,2,{"b":"\ud83d\ude00"}],"c":-0.5E-3}`))
	f.Fuzz(func(t *testing.T, value []byte) { checkQuick(t, value) })
}
