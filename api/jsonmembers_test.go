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
		fast, ok := fastCallBody(body)
		if !ok {
			return
		}
		var slow callBody
		if err := decodeStrictSlow(body, &slow); err != nil {
			t.Fatalf("body %q: the fast path took it, the streaming decoder refused it: %v", body, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			fj, _ := json.Marshal(fast)
			sj, _ := json.Marshal(slow)
			t.Fatalf("body %q: fast path %s, slow path %s", body, fj, sj)
		}
	})
}
