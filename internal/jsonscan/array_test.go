package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzArrayElements: ArrayElements accepts exactly the valid texts that
// are one array, and its elements, written back, are that array.
func FuzzArrayElements(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(` [ 1 , "]" , {"a":[2,3]}, [] ,null] `))
	f.Fuzz(func(t *testing.T, data []byte) {
		els, ok := ArrayElements(nil, data)
		trimmed := bytes.TrimLeft(data, " \t\r\n")
		if want := json.Valid(data) && len(trimmed) > 0 && trimmed[0] == '['; ok != want {
			t.Fatalf("ArrayElements(%q) ok = %v, want %v", data, ok, want)
		}
		if !ok {
			if len(els) != 0 {
				t.Fatalf("ArrayElements(%q) failed with %d elements", data, len(els))
			}
			return
		}
		re := []byte{'['}
		for i, e := range els {
			if i > 0 {
				re = append(re, ',')
			}
			if !json.Valid(e) || len(bytes.TrimSpace(e)) != len(e) {
				t.Fatalf("ArrayElements(%q): element %q is not one value without space", data, e)
			}
			re = append(re, e...)
		}
		re = append(re, ']')
		if !tokensEqual(t, data, re) {
			t.Fatalf("ArrayElements(%q) = %q, not the same tokens", data, re)
		}
	})
}

// TestArrayElementsAppends: the elements are appended after what dst
// holds, and a failure leaves dst as it was.
func TestArrayElementsAppends(t *testing.T) {
	dst := [][]byte{[]byte("x")}
	got, ok := ArrayElements(dst, []byte(`[1, [2], "3"]`))
	if !ok || len(got) != 4 || string(got[0]) != "x" || string(got[2]) != "[2]" || string(got[3]) != `"3"` {
		t.Fatalf("ArrayElements = %q, %v", got, ok)
	}
	if got, ok := ArrayElements(dst, []byte(`[1, 2`)); ok || len(got) != 1 {
		t.Fatalf("ArrayElements of a broken array = %q, %v; want dst, false", got, ok)
	}
}
