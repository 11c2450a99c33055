package jcs_test

import (
	"errors"
	"fmt"

	"github.com/carmyhq/carmy/store/jcs"
)

func ExampleAppendCanonical() {
	out, err := jcs.AppendCanonical(nil, []byte(`{ "b": [1.0, 2e-7, "\u00e9"], "a": true }`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))

	_, err = jcs.AppendCanonical(nil, []byte(`{"a": 1, "a": 2}`))
	fmt.Println(errors.Is(err, jcs.ErrDuplicateKey), err)
	// Output:
	// {"a":true,"b":[1,2e-7,"é"]}
	// true jcs: object member name repeated at offset 9: duplicate object member name
}
