package embed

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/store"
)

// writeConfig writes a config file in a fresh temporary directory and
// returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mustLoadConfig loads a config file made of text.
func mustLoadConfig(t *testing.T, text string) FileConfig {
	t.Helper()
	fc, err := loadConfig(writeConfig(t, text))
	if err != nil {
		t.Fatalf("loadConfig: %v\n%s", err, text)
	}
	return fc
}

// specExample is the config file of docs/config.md.
const specExample = `tools:
  - name: create_order
    description: Create an order
    input_schema: {type: object, required: [sku], properties: {sku: {type: string}}}
    timeout: 10s
    require_request_id: true   # a call without request_id is 400 INVALID_REQUEST
    http:
      url: http://127.0.0.1:9000/orders
      method: POST
      headers: {Authorization: "Bearer ${ORDERS_TOKEN}"}
demo_tools: false
auth:
  tokens:
    - {principal: planner, token_env: PLANNER_TOKEN, tools: ["*"]}
  admin_token_env: CARMY_ADMIN_TOKEN
`

var specExampleEnv = map[string]string{
	"ORDERS_TOKEN":      "orders-secret",
	"PLANNER_TOKEN":     "planner-secret-0001",
	"CARMY_ADMIN_TOKEN": "admin-secret-00001",
}

// quietApp returns a runtime that logs nowhere.
func quietApp() *carmy.Runtime {
	return carmy.App(carmy.WithLogger(slog.New(slog.DiscardHandler)))
}

func TestLoadConfigSpecExample(t *testing.T) {
	fc := mustLoadConfig(t, specExample)

	want := FileConfig{
		Tools: []ToolConfig{{
			Name:        "create_order",
			Description: "Create an order",
			InputSchema: map[string]any{
				"type":       "object",
				"required":   []any{"sku"},
				"properties": map[string]any{"sku": map[string]any{"type": "string"}},
			},
			Timeout:          "10s",
			RequireRequestID: true,
			HTTP: &HTTPConfig{
				URL:     "http://127.0.0.1:9000/orders",
				Method:  "POST",
				Headers: map[string]string{"Authorization": "Bearer ${ORDERS_TOKEN}"},
			},
		}},
		Auth: AuthConfig{
			Tokens:        []TokenConfig{{Principal: "planner", TokenEnv: "PLANNER_TOKEN", Tools: []string{"*"}}},
			AdminTokenEnv: "CARMY_ADMIN_TOKEN",
		},
	}
	if !reflect.DeepEqual(fc, want) {
		t.Errorf("loadConfig =\n%#v\nwant\n%#v", fc, want)
	}

	specs, err := fc.toolSpecsLogging(fakeEnv(specExampleEnv), discardLogger())
	if err != nil {
		t.Fatalf("toolSpecsLogging: %v", err)
	}
	if len(specs) != 1 {
		t.Fatalf("toolSpecsLogging gave %d tools, want 1", len(specs))
	}
	s := specs[0]
	if s.Name != "create_order" || s.Description != "Create an order" || s.Timeout != 10*time.Second || !s.RequireRequestID || s.Func == nil {
		t.Errorf("spec = %+v", s)
	}
	var schema map[string]any
	if err := json.Unmarshal(s.InputSchema, &schema); err != nil {
		t.Fatalf("input_schema %s is not JSON: %v", s.InputSchema, err)
	}
	if !reflect.DeepEqual(schema, want.Tools[0].InputSchema) {
		t.Errorf("input_schema = %v, want %v", schema, want.Tools[0].InputSchema)
	}

	a, err := fc.auth(fakeEnv(specExampleEnv))
	if err != nil {
		t.Fatalf("auth: %v", err)
	}
	wantAuth := api.Auth{
		Tokens:     []api.Token{{Principal: "planner", Secret: "planner-secret-0001", Tools: []string{"*"}}},
		AdminToken: "admin-secret-00001",
	}
	if !reflect.DeepEqual(a, wantAuth) {
		t.Errorf("auth = %+v, want %+v", a, wantAuth)
	}
	if !a.Enabled() {
		t.Error("auth with tokens is not enabled")
	}
}

func TestConfiguredToolInRuntime(t *testing.T) {
	// The tool of docs/config.md, pointed at a test upstream: the runtime accepts
	// its schema, enforces it and require_request_id before calling anyone,
	// and the upstream sees the expanded URL and headers.
	var (
		mu   sync.Mutex
		seen []*http.Request
	)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Clone(t.Context()))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"order_id":1}`))
	}))
	t.Cleanup(upstream.Close)

	fc := mustLoadConfig(t, `tools:
  - name: create_order
    input_schema: {type: object, required: [sku], properties: {sku: {type: string}}}
    timeout: 10s
    require_request_id: true
    http:
      url: ${UPSTREAM}/orders/${TENANT}
      headers: {Authorization: "Bearer ${ORDERS_TOKEN}", X-Tenant: "${TENANT}"}
`)
	env := fakeEnv(map[string]string{"UPSTREAM": upstream.URL, "TENANT": "acme", "ORDERS_TOKEN": "orders-secret"})
	specs, err := fc.toolSpecsLogging(env, discardLogger())
	if err != nil {
		t.Fatalf("toolSpecsLogging: %v", err)
	}
	app := quietApp()
	for _, s := range specs {
		if err := app.AddTool(s); err != nil {
			t.Fatalf("AddTool: %v", err)
		}
	}
	caller := carmy.Caller{Principal: "planner"}
	ctx := t.Context()

	_, err = app.Call(ctx, caller, carmy.Request{Tool: "create_order", Arguments: json.RawMessage(`{}`), RequestID: "r0"})
	var fe *store.FieldError
	if !errors.As(err, &fe) || fe.Field != "arguments.sku" {
		t.Errorf("call without sku: err = %v, want an INVALID_REQUEST on arguments.sku", err)
	}
	_, err = app.Call(ctx, caller, carmy.Request{Tool: "create_order", Arguments: json.RawMessage(`{"sku":"KB-01"}`)})
	if !errors.As(err, &fe) || fe.Field != "request_id" {
		t.Errorf("call without request_id: err = %v, want an INVALID_REQUEST on request_id", err)
	}
	mu.Lock()
	n := len(seen)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("the upstream was called %d times by invalid calls", n)
	}

	resp, err := app.Call(ctx, caller, carmy.Request{Tool: "create_order", Arguments: json.RawMessage(`{"sku":"KB-01"}`), RequestID: "r1"})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if resp.Record.Status != store.StatusCompleted || string(resp.Record.Data) != `{"order_id":1}` {
		t.Errorf("record = %+v (data %s), want completed with the upstream's answer", resp.Record, resp.Record.Data)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("the upstream was called %d times, want 1", len(seen))
	}
	r := seen[0]
	if r.Method != http.MethodPost || r.URL.Path != "/orders/acme" {
		t.Errorf("upstream got %s %s, want POST /orders/acme", r.Method, r.URL.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer orders-secret" {
		t.Errorf("Authorization = %q, want the expanded token", got)
	}
	if got := r.Header.Get("X-Tenant"); got != "acme" {
		t.Errorf("X-Tenant = %q, want acme", got)
	}
}

func TestLoadConfigUnknownKeys(t *testing.T) {
	tests := []struct{ name, text, key string }{
		{"top-level typo", "tool:\n  - name: x\n", "tool"},
		{"tool typo", "tools:\n  - name: x\n    requre_request_id: true\n    http: {url: http://127.0.0.1:1/x}\n", "requre_request_id"},
		{"http typo", "tools:\n  - name: x\n    http: {uri: http://127.0.0.1:1/x}\n", "uri"},
		{"auth typo", "auth:\n  token:\n    - {principal: p, token_env: P}\n", "token"},
		{"token typo", "auth:\n  tokens:\n    - {principal: p, tokenenv: P}\n", "tokenenv"},
		{"limits typo", "limits:\n  body_byte: 10\n", "body_byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(writeConfig(t, tt.text))
			if err == nil {
				t.Fatalf("loadConfig accepted an unknown key:\n%s", tt.text)
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("err = %q, want it to name %q", err, tt.key)
			}
		})
	}
}

func TestLoadConfigBadYAML(t *testing.T) {
	for _, text := range []string{
		"tools: [",
		"tools: {name: x}\n", // a mapping where a list belongs
		"demo_tools: maybe\n",
		"limits:\n  body_bytes: lots\n",
	} {
		if _, err := loadConfig(writeConfig(t, text)); err == nil {
			t.Errorf("loadConfig accepted %q", text)
		}
	}
}

func TestLoadConfigLimits(t *testing.T) {
	fc := mustLoadConfig(t, "limits:\n  body_bytes: 2048\n  result_bytes: 4096\n  header_bytes: 8192\n"+
		"  read_header_timeout: 5s\n  body_timeout: 30s\n  write_timeout: 20s\n  idle_timeout: 1m\n")
	if fc.Limits.BodyBytes != 2048 || fc.Limits.ResultBytes != 4096 {
		t.Errorf("limits = %+v", fc.Limits)
	}
	want := api.Timeouts{ReadHeader: 5 * time.Second, Body: 30 * time.Second, Write: 20 * time.Second, Idle: time.Minute, HeaderBytes: 8192}
	if got := fc.Limits.timeouts(); got != want {
		t.Errorf("timeouts = %+v, want %+v", got, want)
	}
	for _, text := range []string{
		"limits:\n  body_bytes: -1\n",
		"limits:\n  result_bytes: -1\n",
		"limits:\n  header_bytes: -1\n",
		"limits:\n  max_running: -1\n",
		"limits:\n  rate_per_principal: -1\n",
		"limits:\n  entries_per_principal: -1\n",
		"limits:\n  body_timeout: -1s\n",
		"limits:\n  write_timeout: -1s\n",
	} {
		_, err := loadConfig(writeConfig(t, text))
		if err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("loadConfig(%q) = %v, want a negative-limit error", text, err)
		}
	}
}

func TestLoadConfigEmpty(t *testing.T) {
	fc, err := loadConfig("")
	if err != nil {
		t.Fatalf(`loadConfig(""): %v`, err)
	}
	if !reflect.DeepEqual(fc, FileConfig{}) {
		t.Errorf(`loadConfig("") = %+v, want an empty config`, fc)
	}
	for _, text := range []string{"", "# nothing here\n", "---\n"} {
		fc := mustLoadConfig(t, text)
		if !reflect.DeepEqual(fc, FileConfig{}) {
			t.Errorf("loadConfig(%q) = %+v, want an empty config", text, fc)
		}
	}
	specs, err := FileConfig{}.toolSpecsLogging(fakeEnv(nil), discardLogger())
	if err != nil || len(specs) != 0 {
		t.Errorf("toolSpecsLogging of an empty config = %v, %v", specs, err)
	}
	a, err := FileConfig{}.auth(fakeEnv(nil))
	if err != nil || a.Enabled() {
		t.Errorf("auth of an empty config = %+v, %v; want auth off", a, err)
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := loadConfig(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("loadConfig(missing) = %v, want an error wrapping fs.ErrNotExist", err)
	}
}

// oneTool is a config with one HTTP tool; extra is appended to its entry.
func oneTool(extra string) string {
	return "tools:\n  - name: t\n    http: {url: \"http://127.0.0.1:9/x\"}\n" + extra
}

func TestToolSpecsTimeout(t *testing.T) {
	tests := []struct {
		timeout string
		want    time.Duration
		ok      bool
	}{
		{"", 0, true}, // the runtime's default
		{"10s", 10 * time.Second, true},
		{"1m30s", 90 * time.Second, true},
		{"250ms", 250 * time.Millisecond, true},
		{"abc", 0, false},
		{"-1s", 0, false},
		{"0s", 0, false},
		{"10", 0, false}, // no unit
	}
	for _, tt := range tests {
		t.Run(tt.timeout, func(t *testing.T) {
			fc := FileConfig{Tools: []ToolConfig{{Name: "t", Timeout: tt.timeout, HTTP: &HTTPConfig{URL: "http://127.0.0.1:9/x"}}}}
			specs, err := fc.toolSpecsLogging(fakeEnv(nil), discardLogger())
			if !tt.ok {
				if err == nil || !strings.Contains(err.Error(), "timeout") {
					t.Errorf("toolSpecsLogging with timeout %q = %v, want a timeout error", tt.timeout, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("toolSpecsLogging with timeout %q: %v", tt.timeout, err)
			}
			if specs[0].Timeout != tt.want {
				t.Errorf("Timeout = %v, want %v", specs[0].Timeout, tt.want)
			}
		})
	}
	// Through YAML too.
	fc := mustLoadConfig(t, "tools:\n  - name: t\n    timeout: 10s\n    http: {url: \"http://127.0.0.1:9/x\"}\n")
	specs, err := fc.toolSpecsLogging(fakeEnv(nil), discardLogger())
	if err != nil || specs[0].Timeout != 10*time.Second {
		t.Errorf("timeout: 10s from YAML = %v, %v", specs, err)
	}
}

func TestToolSpecsInputSchema(t *testing.T) {
	fc := mustLoadConfig(t, `tools:
  - name: t
    input_schema:
      type: object
      required: [n]
      additionalProperties: false
      properties:
        n: {type: integer, minimum: 1}
        tags: {type: array, items: {type: string}}
    http: {url: "http://127.0.0.1:9/x"}
`)
	specs, err := fc.toolSpecsLogging(fakeEnv(nil), discardLogger())
	if err != nil {
		t.Fatalf("toolSpecsLogging: %v", err)
	}
	if !json.Valid(specs[0].InputSchema) {
		t.Fatalf("input_schema %s is not JSON", specs[0].InputSchema)
	}
	app := quietApp()
	if err := app.AddTool(specs[0]); err != nil {
		t.Fatalf("the runtime refused the schema %s: %v", specs[0].InputSchema, err)
	}
	if tools := app.Tools(); len(tools) != 1 || !json.Valid(tools[0].InputSchema) {
		t.Errorf("Tools() = %+v", tools)
	}
	// The schema is enforced: these never reach the (unreachable) upstream.
	for _, args := range []string{`{}`, `{"n":0}`, `{"n":"one"}`, `{"n":1,"other":true}`, `{"n":1,"tags":[1]}`} {
		_, err := app.Call(t.Context(), carmy.Caller{Principal: "p"}, carmy.Request{Tool: "t", Arguments: json.RawMessage(args)})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("arguments %s: err = %v, want INVALID_REQUEST", args, err)
		}
	}

	// Without input_schema, none.
	fc = mustLoadConfig(t, oneTool(""))
	specs, err = fc.toolSpecsLogging(fakeEnv(nil), discardLogger())
	if err != nil || specs[0].InputSchema != nil {
		t.Errorf("no input_schema: %s, %v", specs[0].InputSchema, err)
	}
}

func TestToolSpecsInvalidSchemaRefusedByRuntime(t *testing.T) {
	fc := mustLoadConfig(t, "tools:\n  - name: t\n    input_schema: {type: 12}\n    http: {url: \"http://127.0.0.1:9/x\"}\n")
	specs, err := fc.toolSpecsLogging(fakeEnv(nil), discardLogger())
	if err != nil {
		t.Fatalf("toolSpecsLogging: %v", err)
	}
	if err := quietApp().AddTool(specs[0]); err == nil {
		t.Error("the runtime accepted input_schema {type: 12}")
	}
}

func TestToolSpecsNeedsHTTP(t *testing.T) {
	fc := mustLoadConfig(t, "tools:\n  - name: local\n    description: no http section\n")
	_, err := fc.toolSpecsLogging(fakeEnv(nil), discardLogger())
	if err == nil || !strings.Contains(err.Error(), "http") || !strings.Contains(err.Error(), "local") {
		t.Errorf("toolSpecsLogging = %v, want an error naming the tool and its missing http section", err)
	}
}

func TestToolSpecsExpansion(t *testing.T) {
	env := map[string]string{"HOST": "127.0.0.1:9000", "TOKEN": "s3cret"}
	fc := FileConfig{Tools: []ToolConfig{{Name: "t", HTTP: &HTTPConfig{
		URL:     "http://${HOST}/orders",
		Headers: map[string]string{"Authorization": "Bearer ${TOKEN}", "X-Plain": "$TOKEN stays"},
	}}}}
	if _, err := fc.toolSpecsLogging(fakeEnv(env), discardLogger()); err != nil {
		t.Fatalf("toolSpecsLogging: %v", err)
	}

	for _, tt := range []struct {
		name string
		http HTTPConfig
		env  string
	}{
		{"url", HTTPConfig{URL: "http://${MISSING_HOST}/x"}, "MISSING_HOST"},
		{"header", HTTPConfig{URL: "http://127.0.0.1:9/x", Headers: map[string]string{"Authorization": "Bearer ${MISSING_TOKEN}"}}, "MISSING_TOKEN"},
		{"second of two", HTTPConfig{URL: "http://${HOST}/${MISSING_PATH}"}, "MISSING_PATH"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fc := FileConfig{Tools: []ToolConfig{{Name: "t", HTTP: &tt.http}}}
			_, err := fc.toolSpecsLogging(fakeEnv(env), discardLogger())
			if err == nil || !strings.Contains(err.Error(), tt.env) {
				t.Errorf("toolSpecsLogging = %v, want an error naming %s", err, tt.env)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	env := fakeEnv(map[string]string{"A": "1", "B_2": "two", "EMPTY": ""})
	tests := []struct{ in, want, missing string }{
		{"plain", "plain", ""},
		{"${A}", "1", ""},
		{"x${A}y${B_2}z", "x1ytwoz", ""},
		{"$A and ${ A } are left alone", "$A and ${ A } are left alone", ""},
		{"${NOPE}", "", "NOPE"},
		{"${EMPTY}", "", "EMPTY"},
	}
	for _, tt := range tests {
		got, err := expand(tt.in, env)
		if tt.missing != "" {
			if err == nil || !strings.Contains(err.Error(), tt.missing) {
				t.Errorf("expand(%q) = %q, %v; want an error naming %s", tt.in, got, err, tt.missing)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestToolSpecsRefusesNonHTTPURL(t *testing.T) {
	for _, u := range []string{
		"",
		"ftp://127.0.0.1/x",
		"file:///etc/passwd",
		"127.0.0.1:9000/orders",
		"/orders",
		"http://",
		"http//127.0.0.1/x",
	} {
		fc := FileConfig{Tools: []ToolConfig{{Name: "t", HTTP: &HTTPConfig{URL: u}}}}
		if _, err := fc.toolSpecsLogging(fakeEnv(nil), discardLogger()); err == nil {
			t.Errorf("toolSpecsLogging accepted url %q", u)
		}
	}
	for _, u := range []string{"http://127.0.0.1:9000/orders", "https://orders.example.com/v1/orders?x=1"} {
		fc := FileConfig{Tools: []ToolConfig{{Name: "t", HTTP: &HTTPConfig{URL: u}}}}
		if _, err := fc.toolSpecsLogging(fakeEnv(nil), discardLogger()); err != nil {
			t.Errorf("toolSpecsLogging refused url %q: %v", u, err)
		}
	}
}

func TestAuthTokens(t *testing.T) {
	fc := mustLoadConfig(t, `auth:
  tokens:
    - {principal: planner, token_env: PLANNER_TOKEN}
    - {principal: billing, token_env: BILLING_TOKEN, tools: [create_order, echo]}
    - {principal: nobody, token_env: NOBODY_TOKEN, tools: []}
`)
	a, err := fc.auth(fakeEnv(map[string]string{"PLANNER_TOKEN": "p-secret-000000001", "BILLING_TOKEN": "b-secret-000000001", "NOBODY_TOKEN": "n-secret-000000001"}))
	if err != nil {
		t.Fatalf("auth: %v", err)
	}
	want := api.Auth{Tokens: []api.Token{
		{Principal: "planner", Secret: "p-secret-000000001", Tools: []string{"*"}}, // absent means every tool
		{Principal: "billing", Secret: "b-secret-000000001", Tools: []string{"create_order", "echo"}},
		{Principal: "nobody", Secret: "n-secret-000000001", Tools: []string{}}, // an explicit empty list allows none
	}}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("auth =\n%+v\nwant\n%+v", a, want)
	}
	if !a.Enabled() || a.AdminToken != "" {
		t.Errorf("auth = %+v: want enabled, without an admin token", a)
	}
}

func TestAuthErrors(t *testing.T) {
	tests := []struct {
		name, text string
		env        map[string]string
		mention    string
	}{
		{"token env unset", "auth:\n  tokens:\n    - {principal: planner, token_env: PLANNER_TOKEN}\n",
			nil, "PLANNER_TOKEN"},
		{"token_env missing", "auth:\n  tokens:\n    - {principal: planner}\n",
			nil, "token_env"},
		{"admin env unset", "auth:\n  admin_token_env: CARMY_ADMIN_TOKEN\n",
			nil, "CARMY_ADMIN_TOKEN"},
		{"shared secret", "auth:\n  tokens:\n    - {principal: a, token_env: A}\n    - {principal: b, token_env: B}\n",
			map[string]string{"A": "same-token-0000001", "B": "same-token-0000001"}, "share"},
		{"env and hash", "auth:\n  tokens:\n    - {principal: a, token_env: A, token_sha256: " + sha256Hex("x") + "}\n",
			map[string]string{"A": "x"}, "exclude"},
		{"bad hash", "auth:\n  tokens:\n    - {principal: a, token_sha256: abc}\n", nil, "hex"},
		{"upper-case hash", "auth:\n  tokens:\n    - {principal: a, token_sha256: " + strings.ToUpper(sha256Hex("x")) + "}\n", nil, "hex"},
		{"same token as secret and hash", "auth:\n  tokens:\n    - {principal: a, token_env: A}\n    - {principal: b, token_sha256: " + sha256Hex("same-token-0000001") + "}\n",
			map[string]string{"A": "same-token-0000001"}, "share"},
		{"admin env and hash", "auth:\n  admin_token_env: ADM\n  admin_token_sha256: " + sha256Hex("x") + "\n",
			map[string]string{"ADM": "x"}, "exclude"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := mustLoadConfig(t, tt.text)
			_, err := fc.auth(fakeEnv(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("auth = %v, want an error mentioning %q", err, tt.mention)
			}
		})
	}
}

func TestAuthAdminTokenOnly(t *testing.T) {
	fc := mustLoadConfig(t, "auth:\n  admin_token_env: CARMY_ADMIN_TOKEN\n")
	a, err := fc.auth(fakeEnv(map[string]string{"CARMY_ADMIN_TOKEN": "adm-token-00000001"}))
	if err != nil {
		t.Fatalf("auth: %v", err)
	}
	if a.AdminToken != "adm-token-00000001" || len(a.Tokens) != 0 || !a.Enabled() {
		t.Errorf("auth = %+v, want the admin token alone, enabled", a)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestAuthHashedTokens checks tokens given as SHA-256 digests: the file
// holds no secret, and the server accepts the token whose digest it is.
func TestAuthHashedTokens(t *testing.T) {
	fc := mustLoadConfig(t, "auth:\n  admin_token_sha256: "+sha256Hex("adm-secret")+
		"\n  tokens:\n    - {principal: planner, token_sha256: "+sha256Hex("p-secret")+", tools: [echo]}\n")
	a, err := fc.auth(fakeEnv(nil))
	if err != nil {
		t.Fatalf("auth: %v", err)
	}
	if !a.Enabled() || a.Tokens[0].Secret != "" || a.Tokens[0].SecretSHA256 != sha256Hex("p-secret") || a.AdminTokenSHA256 != sha256Hex("adm-secret") {
		t.Fatalf("auth = %+v", a)
	}
	srv := httptest.NewServer(mustAPI(t, a))
	defer srv.Close()
	for _, tc := range []struct {
		token string
		want  int
	}{
		{"p-secret", http.StatusOK},
		{"adm-secret", http.StatusOK},
		{sha256Hex("p-secret"), http.StatusUnauthorized}, // the digest itself is no token
		{"wrong", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/tools", nil)
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("token %q: %d, want %d", tc.token, resp.StatusCode, tc.want)
		}
	}
}

// mustAPI serves a runtime with no tools behind auth a.
func mustAPI(t *testing.T, a api.Auth) http.Handler {
	t.Helper()
	s, err := api.New(carmy.App().Engine(), api.Config{Auth: a})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLoadConfigQuota checks the per-principal bounds on records:
// limits.entries_per_principal is every principal's default, a token's
// max_entries its own; negative values are refused.
func TestLoadConfigQuota(t *testing.T) {
	fc := mustLoadConfig(t, `auth:
  tokens:
    - {principal: planner, token_env: PLANNER_TOKEN, max_entries: 500}
    - {principal: reporter, token_env: REPORTER_TOKEN}
  admin_token_env: CARMY_ADMIN_TOKEN
limits:
  entries_per_principal: 100
`)
	if fc.Limits.EntriesPerPrincipal != 100 || fc.Auth.Tokens[0].MaxEntries != 500 || fc.Auth.Tokens[1].MaxEntries != 0 {
		t.Fatalf("config = %+v", fc)
	}
	a, err := fc.auth(fakeEnv(map[string]string{"PLANNER_TOKEN": "p-token-000000001", "REPORTER_TOKEN": "r-token-000000001", "CARMY_ADMIN_TOKEN": "adm-token-00000001"}))
	if err != nil {
		t.Fatalf("auth: %v", err)
	}
	want := api.Auth{
		Tokens: []api.Token{
			{Principal: "planner", Secret: "p-token-000000001", Tools: []string{"*"}, MaxEntries: 500},
			{Principal: "reporter", Secret: "r-token-000000001", Tools: []string{"*"}},
		},
		AdminToken:             "adm-token-00000001",
		MaxEntriesPerPrincipal: 100,
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("auth =\n%+v\nwant\n%+v", a, want)
	}

	// The default alone does not turn auth on.
	a, err = mustLoadConfig(t, "limits:\n  entries_per_principal: 7\n").auth(fakeEnv(nil))
	if err != nil || a.Enabled() || a.MaxEntriesPerPrincipal != 7 {
		t.Errorf("auth = %+v, %v; want auth off with a default of 7", a, err)
	}

	for _, text := range []string{
		"limits:\n  entries_per_principal: -1\n",
		"auth:\n  tokens:\n    - {principal: planner, token_env: PLANNER_TOKEN, max_entries: -1}\n",
	} {
		_, err := loadConfig(writeConfig(t, text))
		if err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("loadConfig(%q) = %v, want a negative-limit error", text, err)
		}
	}
	for _, text := range []string{
		"limits:\n  entries_per_principal: lots\n",
		"auth:\n  tokens:\n    - {principal: planner, token_env: P, max_entry: 3}\n",
	} {
		if _, err := loadConfig(writeConfig(t, text)); err == nil {
			t.Errorf("loadConfig accepted %q", text)
		}
	}
}

// TestAuthRefusesShortTokens checks that a token shorter than
// api.MinTokenBytes is a config error naming the variable and the
// principal, never the token (issue 14 finding 6).
func TestAuthRefusesShortTokens(t *testing.T) {
	const short = "fifteen-bytes-x" // 15 bytes
	for _, tc := range []struct {
		name, text, env, mention string
	}{
		{"principal", "auth:\n  tokens:\n    - {principal: planner, token_env: PLANNER_TOKEN}\n", "PLANNER_TOKEN", "planner"},
		{"admin", "auth:\n  admin_token_env: CARMY_ADMIN_TOKEN\n", "CARMY_ADMIN_TOKEN", "admin"},
		{"metrics", "auth:\n  metrics_token_env: CARMY_METRICS_TOKEN\n", "CARMY_METRICS_TOKEN", "metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := mustLoadConfig(t, tc.text)
			_, err := fc.auth(fakeEnv(map[string]string{tc.env: short}))
			if err == nil || !strings.Contains(err.Error(), tc.env) || !strings.Contains(err.Error(), tc.mention) ||
				!strings.Contains(err.Error(), "16 bytes") || !strings.Contains(err.Error(), "carmy keygen") {
				t.Fatalf("auth = %v, want an error naming %s, %s, 16 bytes and carmy keygen", err, tc.env, tc.mention)
			}
			if strings.Contains(err.Error(), short) {
				t.Fatalf("the error holds the token: %v", err)
			}
			// 16 bytes are enough.
			if _, err := fc.auth(fakeEnv(map[string]string{tc.env: short + "y"})); err != nil {
				t.Fatalf("a 16-byte token: %v", err)
			}
		})
	}
}

// TestAuthMetricsToken checks auth.metrics_token_env and
// auth.metrics_token_sha256: the token GET /metrics then needs.
func TestAuthMetricsToken(t *testing.T) {
	a, err := mustLoadConfig(t, "auth:\n  metrics_token_env: CARMY_METRICS_TOKEN\n").auth(fakeEnv(map[string]string{"CARMY_METRICS_TOKEN": "metrics-token-0001"}))
	if err != nil || a.MetricsToken != "metrics-token-0001" || a.Enabled() {
		t.Fatalf("auth = %+v, %v; want the metrics token, auth off", a, err)
	}
	a, err = mustLoadConfig(t, "auth:\n  metrics_token_sha256: "+sha256Hex("metrics-token-0001")+"\n").auth(fakeEnv(nil))
	if err != nil || a.MetricsTokenSHA256 != sha256Hex("metrics-token-0001") {
		t.Fatalf("auth = %+v, %v; want the metrics token's digest", a, err)
	}
	for _, tc := range []struct{ text, mention string }{
		{"auth:\n  metrics_token_env: CARMY_METRICS_TOKEN\n", "CARMY_METRICS_TOKEN"},
		{"auth:\n  metrics_token_env: M\n  metrics_token_sha256: " + sha256Hex("x") + "\n", "exclude"},
	} {
		if _, err := mustLoadConfig(t, tc.text).auth(fakeEnv(map[string]string{"M": "metrics-token-0001"})); err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("auth(%q) = %v, want an error mentioning %s", tc.text, err, tc.mention)
		}
	}
	// The metrics token is no principal's.
	_, err = mustLoadConfig(t, "auth:\n  metrics_token_env: M\n  admin_token_env: A\n").auth(fakeEnv(map[string]string{"M": "same-token-0000001", "A": "same-token-0000001"}))
	if err == nil || !strings.Contains(err.Error(), "share") {
		t.Errorf("a metrics token shared with the admin: %v", err)
	}
}

// TestLimitsAuthFailures checks limits.auth_failures_per_minute.
func TestLimitsAuthFailures(t *testing.T) {
	if got := mustLoadConfig(t, "limits:\n  auth_failures_per_minute: 30\n").Limits.authFailures(); got.PerMinute != 30 {
		t.Errorf("authFailures() = %+v, want 30 per minute", got)
	}
	if got := mustLoadConfig(t, "").Limits.authFailures(); got.PerMinute != 0 {
		t.Errorf("authFailures() = %+v, want the API's default (0)", got)
	}
	if _, err := loadConfig(writeConfig(t, "limits:\n  auth_failures_per_minute: -1\n")); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("a negative auth_failures_per_minute: %v", err)
	}
}

// TestConfigAuditRetention: audit.retention defaults to 400 days, takes a
// duration, days or off, and refuses anything else.
func TestConfigAuditRetention(t *testing.T) {
	for text, want := range map[string]time.Duration{
		"":                           400 * 24 * time.Hour,
		"audit: {retention: 30d}\n":  30 * 24 * time.Hour,
		"audit: {retention: 720h}\n": 720 * time.Hour,
		"audit:\n  retention: off\n": 0,
	} {
		got, err := mustLoadConfig(t, text).Audit.retention()
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", text, got, err, want)
		}
	}
	for _, text := range []string{"audit: {retention: soon}\n", "audit: {retention: -1h}\n", "audit: {keep: 1}\n"} {
		if _, err := loadConfig(writeConfig(t, text)); err == nil {
			t.Errorf("%q: accepted", text)
		}
	}
}
