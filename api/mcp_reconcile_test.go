package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// interrupted makes an interrupted execution of echo for principal, as a
// node that died leaves it, and returns its id.
func interrupted(t *testing.T, app *carmy.Runtime, principal, requestID string) string {
	t.Helper()
	fp, err := store.Fingerprint("echo", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	node := "node-of-" + requestID
	res, err := app.Store().Reserve(t.Context(), store.Key{Principal: principal, RequestID: requestID}, fp,
		store.Execution{ID: engine.NewExecutionID(now), Tool: "echo", NodeID: node, StartedAt: now})
	if err != nil || res.Outcome != store.Reserved {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	if _, err := app.Store().MarkInterrupted(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	return res.Record.ExecutionID
}

// TestMCPResolveReleaseAnswersAsHTTP: carmy.resolve with status released
// answers the record the release removed as POST
// /v1/executions/{id}/resolve does: "released": true beside the same
// members. The client of /mcp is the official Go SDK's.
func TestMCPResolveReleaseAnswersAsHTTP(t *testing.T) {
	app, base := startOASNode(t, api.Config{Auth: oasAuth()})
	overHTTP, overMCP := interrupted(t, app, "planner", "rel-http"), interrupted(t, app, "planner", "rel-mcp")

	req, err := http.NewRequest(http.MethodPost, base+"/v1/executions/"+overHTTP+"/resolve", strings.NewReader(`{"status":"released"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+oasPlanner)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var byHTTP map[string]any
	err = json.NewDecoder(resp.Body).Decode(&byHTTP)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || byHTTP["released"] != true {
		t.Fatalf("POST /v1/executions/{id}/resolve released: %d %v %v", resp.StatusCode, byHTTP, err)
	}

	cs := connectListener(t, base, oasPlanner, v1125).cs
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "carmy.resolve",
		Arguments: map[string]any{"execution_id": overMCP, "status": "released"}})
	if err != nil || res.IsError {
		t.Fatalf("carmy.resolve released: %+v, %v", res, err)
	}
	byMCP, _ := res.StructuredContent.(map[string]any)
	if byMCP["released"] != true || byMCP["execution_id"] != overMCP || byMCP["status"] != byHTTP["status"] {
		t.Errorf("carmy.resolve released answers %v; want, as over HTTP, %v", byMCP, byHTTP)
	}
	for k := range byHTTP {
		if _, ok := byMCP[k]; !ok {
			t.Errorf("carmy.resolve released: no %q, which HTTP's answer has (%v)", k, byHTTP)
		}
	}
	// Released: the identity is free, as over HTTP.
	for _, id := range []string{"rel-http", "rel-mcp"} {
		if _, err := app.Store().Lookup(t.Context(), store.Key{Principal: "planner", RequestID: id}); err == nil {
			t.Errorf("%s is still held after its release", id)
		}
	}
}
