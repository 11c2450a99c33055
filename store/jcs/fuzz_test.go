package jcs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/carmyhq/carmy/store/jcs"
)

func FuzzCanonicalize(f *testing.F) {
	for _, seed := range []string{
		`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`,
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
		`[0, -0, 1e21, 1e-7, 5e-324, 1.7976931348623157e308, 9007199254740993]`,
		`{"a":{"b":[{"c":null}]}}`,
		`"\u0000\u001f\u007f\u2028"`,
		`true`, `null`, `[]`, `{}`, `""`,
		// Invalid inputs.
		``, `[1,]`, `{"a":1,"a":2}`, `1e400`, `"\ud800"`, "\"\xff\"", `01`, `[[[[`,
		`{"a" 1}`, `"\ud83d\u0041"`, `NaN`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := jcs.AppendCanonical(nil, in)
		if err != nil {
			if out != nil {
				t.Fatalf("output %q returned with error %v", out, err)
			}
			n := 0
			for _, s := range sentinels {
				if errors.Is(err, s) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("error %v wraps %d sentinels, want 1", err, n)
			}
			// Anything encoding/json accepts is syntactically valid, so
			// it may only be rejected for an I-JSON or depth reason.
			if errors.Is(err, jcs.ErrSyntax) && json.Valid(in) {
				t.Fatalf("valid JSON %q rejected as syntax error: %v", in, err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		if !json.Valid(out) {
			t.Fatalf("output %q of %q is not valid JSON", out, in)
		}
		again, err := jcs.AppendCanonical(nil, out)
		if err != nil {
			t.Fatalf("re-canonicalising %q: %v", out, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
		// The output must denote the same value as the input (as far as
		// encoding/json can tell; it may fail on e.g. 1e-400).
		var vin, vout any
		if json.Unmarshal(in, &vin) == nil {
			if err := json.Unmarshal(out, &vout); err != nil {
				t.Fatalf("unmarshal output %q: %v", out, err)
			}
			if !reflect.DeepEqual(vin, vout) {
				t.Fatalf("value changed: %q -> %q", in, out)
			}
		}
	})
}
