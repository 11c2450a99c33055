package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecodeStrictPaths checks that decodeStrict's fast path agrees with
// the streaming decoder on every body: the same decoded value, or errors
// of the same code and field.
func FuzzDecodeStrictPaths(f *testing.F) {
	for _, body := range callSeeds {
		f.Add([]byte(body))
	}
	f.Add([]byte(`{"tool":"echo","arguments":{"a":[1,{"b":"}"}],"c":"\"{"},"metadata":{}}`))
	f.Add([]byte(` { "tool" : "x" , "session_id" : "s" } `))
	// Errors of two kinds in one body: each path words the same first one.
	f.Add([]byte(`{"tool":"echo","arguments":{"a":1,"a":2},"tool":"x"}`))
	f.Add([]byte(`{"metadata":{"a":"\ud800"},"arguments":{"b":1e999},"tool":"echo"}`))
	f.Add([]byte(`{"tool":"e\u0063ho","arguments":{"k":1,"k":1}}`))
	f.Add([]byte("{\"tool\":\"\xc3\x28\",\"timeout_ms\":7}"))
	f.Add([]byte(`{"tool":"echo","timeout_ms":"1e400"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast, slow callBody
		errFast := decodeStrict(body, &fast)
		errSlow := decodeStrictSlow(body, &slow)
		if (errFast == nil) != (errSlow == nil) {
			t.Fatalf("body %q: fast path error %v, slow path error %v", body, errFast, errSlow)
		}
		if errFast != nil {
			var a, b *Error
			if !errors.As(errFast, &a) || !errors.As(errSlow, &b) {
				t.Fatalf("body %q: errors %T and %T, want *Error", body, errFast, errSlow)
			}
			if a.Code != b.Code || a.Extra["field"] != b.Extra["field"] {
				t.Fatalf("body %q: fast path %s %v, slow path %s %v", body, a.Code, a.Extra, b.Code, b.Extra)
			}
			return
		}
		if !reflect.DeepEqual(fast, slow) {
			fj, _ := json.Marshal(fast)
			sj, _ := json.Marshal(slow)
			t.Fatalf("body %q: fast path %s, slow path %s", body, fj, sj)
		}
	})
}

// objectNames returns the member names of objectMembers.
func objectNames(body []byte) (names [][]byte, ok bool) {
	ms, ok := objectMembers(body)
	for _, m := range ms {
		names = append(names, m.name)
	}
	return names, ok
}

func TestObjectNames(t *testing.T) {
	for body, want := range map[string][]string{
		`{}`: nil,
		` { "a" : 1 , "b":{"c":[1,"]"]}, "d":"x\"y" } `: {"a", "b", "d"},
		`{"\u0074ool":true,"n":null,"f":-1.5e3}`:        {"tool", "n", "f"},
	} {
		names, ok := objectNames([]byte(body))
		if !ok {
			t.Errorf("objectNames(%s): not an object", body)
			continue
		}
		var got []string
		for _, n := range names {
			got = append(got, string(n))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("objectNames(%s) = %q, want %q", body, got, want)
		}
	}
	for _, body := range []string{`[]`, `"x"`, `1`, `null`} {
		if _, ok := objectNames([]byte(body)); ok {
			t.Errorf("objectNames(%s): ok, want not an object", body)
		}
	}
}

// FuzzFastCallBody checks that fastCallBody, where it takes a body,
// decodes it as the streaming decoder does.
func FuzzFastCallBody(f *testing.F) {
	for _, body := range callSeeds {
		f.Add([]byte(body))
	}
	f.Add([]byte(`{"tool":"echo","arguments":{"a":[1,{"b":"}"}],"c":"\"{"},"metadata":{},"request_id":"r-1","session_id":null,"timeout_ms":5}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		ms, isObject := objectMembers(body)
		if !isObject {
			return
		}
		fast, ok := fastCallBody(ms)
		if !ok {
			return
		}
		// Taken, it is as strict as the streaming decoder: it refuses
		// what that one refuses, with the same code and field.
		errFast := checkStrict(ms)
		var slow callBody
		errSlow := decodeStrictSlow(body, &slow)
		if (errFast == nil) != (errSlow == nil) {
			t.Fatalf("body %q: fast path error %v, streaming decoder error %v", body, errFast, errSlow)
		}
		if errFast != nil {
			var a, b *Error
			if !errors.As(errFast, &a) || !errors.As(errSlow, &b) || a.Code != b.Code || a.Extra["field"] != b.Extra["field"] {
				t.Fatalf("body %q: fast path %v, streaming decoder %v", body, errFast, errSlow)
			}
			return
		}
		if !reflect.DeepEqual(fast, slow) {
			fj, _ := json.Marshal(fast)
			sj, _ := json.Marshal(slow)
			t.Fatalf("body %q: fast path %s, slow path %s", body, fj, sj)
		}
	})
}
