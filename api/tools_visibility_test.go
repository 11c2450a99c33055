package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/api"
)

// TestToolListsAgree: each tenant is shown the same tools by GET /v1/tools
// and by MCP's tools/list (besides the carmy.* reconcile tools, which
// every caller may call): the runtime's ToolsFor decides both.
func TestToolListsAgree(t *testing.T) {
	const someTools = "some-tools-token"
	auth := oasAuth()
	auth.Tokens = append(auth.Tokens, api.Token{Principal: "some", Secret: someTools, Tools: []string{"lookup", "echo", "no_such_tool"}})
	_, base := startOASNode(t, api.Config{Auth: auth})

	httpTools := func(token string) []string {
		req, err := http.NewRequest(http.MethodGet, base+"/v1/tools", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil {
			t.Fatalf("GET /v1/tools: %d %s", resp.StatusCode, raw)
		}
		var names []string
		for _, tl := range out.Tools {
			names = append(names, tl.Name)
		}
		return names
	}
	mcpTools := func(token string) []string {
		status, msg := mcpPost(t, base, token, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		res, _ := msg["result"].(map[string]any)
		list, ok := res["tools"].([]any)
		if status != http.StatusOK || !ok {
			t.Fatalf("tools/list: %d %v", status, msg)
		}
		var names []string
		for _, tl := range list {
			m, _ := tl.(map[string]any)
			if name, _ := m["name"].(string); !strings.HasPrefix(name, "carmy.") {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names
	}
	for _, tc := range []struct {
		token string
		want  []string // nil: every tool
	}{
		{oasAdmin, nil},
		{oasPlanner, nil},
		{oasLimited, []string{"echo"}},
		{someTools, []string{"echo", "lookup"}},
	} {
		overHTTP, overMCP := httpTools(tc.token), mcpTools(tc.token)
		if !slices.Equal(overHTTP, overMCP) {
			t.Errorf("token %s: GET /v1/tools shows %v, tools/list %v", tc.token, overHTTP, overMCP)
		}
		if tc.want != nil && !slices.Equal(overHTTP, tc.want) {
			t.Errorf("token %s: shown %v, want %v", tc.token, overHTTP, tc.want)
		}
		if tc.want == nil && len(overHTTP) < 5 {
			t.Errorf("token %s: shown %v, want every demo tool", tc.token, overHTTP)
		}
	}
}
