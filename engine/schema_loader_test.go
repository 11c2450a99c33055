package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/carmyhq/carmy/engine"
)

func noop(context.Context, engine.Call) (any, error) { return nil, nil }

// TestSchemaLoadsNothing: a schema that references a local file or a URL
// is refused, without the file's content in the error and without a
// connection; a schema's own $defs and the standard meta-schemas still
// work.
func TestSchemaLoadsNothing(t *testing.T) {
	const secret = "file-SECRET-7c41"
	path := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(path, []byte(`{"type":"string","description":"`+secret+`","enum":["`+secret+`"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	for _, ref := range []string{"file://" + path, srv.URL + "/schema.json"} {
		schema := fmt.Sprintf(`{"type":"object","properties":{"x":{"$ref":%q}}}`, ref)
		err := engine.CheckTool(engine.ToolSpec{Name: "t", InputSchema: json.RawMessage(schema), Func: noop})
		if err == nil {
			t.Errorf("a schema referencing %s compiled", ref)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error holds the file's content: %v", err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the compiler made %d requests", n)
	}
	for _, schema := range []string{
		`{"type":"object","properties":{"x":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"x":{"type":"string"}}}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`,
	} {
		if err := engine.CheckTool(engine.ToolSpec{Name: "t", InputSchema: json.RawMessage(schema), Func: noop}); err != nil {
			t.Errorf("%s: %v", schema, err)
		}
	}
}
