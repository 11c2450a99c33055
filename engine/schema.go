package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/carmyhq/carmy/store"
)

var english = message.NewPrinter(language.English)

// schema is a compiled JSON Schema for a tool's arguments.
type schema struct{ s *jsonschema.Schema }

// compileSchema compiles a tool's input schema on its own: the schema
// document itself and the standard meta-schemas (built into the
// compiler) are all it may use. A reference to anything else (a file:
// URL, an http: URL, a relative one) fails the compilation, so a schema
// that comes from a stranger (an upstream MCP server's tool) can neither
// read the node's files nor make it connect anywhere.
func compileSchema(name string, raw json.RawMessage) (*schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	url := "carmy:tool/" + name + "/input_schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	return &schema{s: s}, nil
}

// noLoader is the URL loader of a tool's schema compiler: it loads
// nothing (the compiler's default, jsonschema.FileLoader, reads local
// files).
type noLoader struct{}

func (noLoader) Load(string) (any, error) {
	return nil, errors.New("a tool's schema may not reference another document (no file or network access): only its own definitions and the standard meta-schemas")
}

// anyObject reports whether raw is the schema {"type":"object"} and
// nothing more, which every call's arguments meet already (they are
// checked to be an object): such a schema is not compiled nor run.
func anyObject(raw json.RawMessage) bool {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || len(m) != 1 {
		return false
	}
	return m["type"] == "object"
}

// validate returns nil, or a *store.FieldError naming the first failing
// location inside arguments (for example "arguments.sku").
func (s *schema) validate(args json.RawMessage) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return invalid("arguments", "%v", err)
	}
	err = s.s.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return invalid("arguments", "%v", err)
	}
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	loc := append([]string{"arguments"}, leaf.InstanceLocation...)
	if req, ok := leaf.ErrorKind.(*kind.Required); ok && len(req.Missing) > 0 {
		loc = append(loc, req.Missing[0])
	}
	field := strings.Join(loc, ".")
	msg := leaf.ErrorKind.LocalizedString(english)
	return &store.FieldError{Field: field, Err: fmt.Errorf("does not match the tool's input_schema: %s", msg)}
}
