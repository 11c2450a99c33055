package fastpath

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/internal/jsonscan"
)

// sdkAnswer is the answer the SDK's encoders make of a tools/call result:
// the result's own MarshalJSON (through jsonscan.MarshalNoHTML, and with
// newProtocolResult's additions when serverInfo is set), then the
// JSON-RPC envelope.
func sdkAnswer(t *testing.T, id jsonrpc.ID, res *sdk.CallToolResult, serverInfo json.RawMessage, complete bool) (string, bool) {
	t.Helper()
	var raw json.RawMessage
	var err error
	if serverInfo != nil {
		raw, err = newProtocolResult(res, serverInfo, complete)
	} else {
		raw, err = jsonscan.MarshalNoHTML(res)
	}
	if err != nil {
		return "", false
	}
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: raw})
	if err != nil {
		return "", false
	}
	return string(data), true
}

// encodeCase is a result to encode both ways.
type encodeCase struct {
	name       string
	id         any
	res        *sdk.CallToolResult
	serverInfo json.RawMessage
	complete   bool
	// other says appendAnswer leaves the result to the SDK's encoders.
	other bool
}

func encodeCases() []encodeCase {
	info := json.RawMessage(`{"name":"carmy","title":"Carmy","version":"v1"}`)
	text := func(s string) []sdk.Content { return []sdk.Content{&sdk.TextContent{Text: s}} }
	return []encodeCase{
		{name: "completed", id: float64(7), res: completed(`{"a":1}`, "r-1", false)},
		{name: "replayed, string id", id: "abc", res: completed(`{"a":[1,2,{"b":null}]}`, "r-2", true)},
		{name: "scalar data", id: float64(-3), res: completed(`"a string"`, "", false)},
		{name: "spaced data", id: float64(0), res: completed("{ \"a\" : [ 1 ,\n 2 ] , \"s\" : \"x y\" }", "r", false)},
		{name: "html data", id: float64(1), res: completed(`{"x":"<b>&amp;</b> \u2028 `+"\u2029 é"+`"}`, "r<&>", false)},
		{name: "escaped data", id: float64(1), res: completed(`{"x":"\"\\\n\t\u0001\ud83d\ude00"}`, "r", false)},
		{name: "refusal", id: float64(2), res: &sdk.CallToolResult{Meta: sdk.Meta{metaErrorCode: "CONFLICT"}, Content: text(`{"error":{"code":"CONFLICT"}}`),
			StructuredContent: json.RawMessage(`{"error":{"code":"CONFLICT"}}`), IsError: true}},
		{name: "new protocol", id: float64(9), res: completed(`{"a":1}`, "r-1", false), serverInfo: info, complete: true},
		{name: "new protocol, refusal", id: float64(9), res: &sdk.CallToolResult{Meta: sdk.Meta{metaErrorCode: "FORBIDDEN"},
			Content: text(`{}`), StructuredContent: json.RawMessage(`{}`), IsError: true}, serverInfo: info},
		{name: "new protocol, own serverInfo", id: float64(9), res: &sdk.CallToolResult{Meta: sdk.Meta{metaServerInfo: "mine"}, Content: text("")},
			serverInfo: info, complete: true},
		{name: "no meta, no structured content", id: "", res: &sdk.CallToolResult{Content: text("plain <text>\x00\x1f\x7f\xff\u2028")}},
		{name: "empty content", id: float64(1), res: &sdk.CallToolResult{Content: []sdk.Content{}}},
		{name: "nil content", id: float64(1), res: &sdk.CallToolResult{}},
		{name: "string id with escapes", id: "a\"b\\c\u2028<&>\u00e9\x01", res: &sdk.CallToolResult{Content: text("x")}},
		{name: "large id", id: float64(-1 << 53), res: &sdk.CallToolResult{Content: text("x")}},
		{name: "number in meta", id: float64(1), res: &sdk.CallToolResult{Meta: sdk.Meta{"n": 1.5}, Content: text("x")}, other: true},
		{name: "image content", id: float64(1), res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}}, other: true},
		{name: "text with annotations", id: float64(1), res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "x", Annotations: &sdk.Annotations{Priority: 1}}}}, other: true},
		{name: "structured map", id: float64(1), res: &sdk.CallToolResult{Content: text("x"), StructuredContent: map[string]any{"a": 1}}, other: true},
		{name: "request state", id: float64(1), res: &sdk.CallToolResult{Content: text("x"), RequestState: "s"}, other: true},
	}
}

// Carmy's _meta keys of a result (package api/mcp, meta.go).
const (
	metaExecutionID = "carmy/execution_id"
	metaStatus      = "carmy/status"
	metaReplayed    = "carmy/replayed"
	metaRequestID   = "carmy/request_id"
	metaErrorCode   = "carmy/error_code"
)

// completed is a result of the shape api/mcp's resultOf gives a
// completed record of data: its _meta, the data as text, and as
// structured content (an object, or the data under "value").
func completed(data, requestID string, replayed bool) *sdk.CallToolResult {
	meta := sdk.Meta{metaExecutionID: "ex-1", metaStatus: "completed", metaReplayed: replayed}
	if requestID != "" {
		meta[metaRequestID] = requestID
	}
	structured := json.RawMessage(data)
	if b := data[jsonscan.SkipSpace([]byte(data), 0)]; b != '{' {
		structured = json.RawMessage(`{"value":` + data + `}`)
	}
	return &sdk.CallToolResult{Meta: meta, Content: []sdk.Content{&sdk.TextContent{Text: data}}, StructuredContent: structured}
}

// TestAppendAnswerMatchesSDK checks that appendAnswer writes the bytes
// the SDK's encoders write, for every result it encodes, and leaves the
// others to them.
func TestAppendAnswerMatchesSDK(t *testing.T) {
	for _, c := range encodeCases() {
		id, err := jsonrpc.MakeID(c.id)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, wantOK := sdkAnswer(t, id, c.res, c.serverInfo, c.complete)
		if !wantOK {
			t.Fatalf("%s: the SDK does not encode it", c.name)
		}
		prefix := []byte("prefix")
		got, ok := appendAnswer(prefix, id, c.res, c.serverInfo, c.complete)
		if ok == c.other {
			t.Errorf("%s: appendAnswer encoded it: %v, want %v", c.name, ok, !c.other)
		}
		if !ok {
			if string(got) != "prefix" {
				t.Errorf("%s: refused, yet wrote %q", c.name, got)
			}
			continue
		}
		if string(got) != "prefix"+want {
			t.Errorf("%s:\n got %s\nwant prefix%s", c.name, got, want)
		}
	}
}

// FuzzAppendAnswer encodes results of arbitrary text, data, request_id
// and id both ways: whenever appendAnswer encodes one, its bytes are the
// SDK's.
func FuzzAppendAnswer(f *testing.F) {
	f.Add("abc", `{"a":1}`, "r-1", int64(1), false)
	f.Add("<&>\u2028\x00\xff", `{"x":"<b>&amp;</b> \u2028"}`, "r<", int64(-5), true)
	f.Add("", " [ 1 , \"a b\" ] ", "", int64(0), false)
	f.Fuzz(func(t *testing.T, text, data, requestID string, n int64, newProtocol bool) {
		var info json.RawMessage
		if newProtocol {
			info = json.RawMessage(`{"name":"carmy"}`)
		}
		res := &sdk.CallToolResult{
			Meta:              sdk.Meta{metaRequestID: requestID, metaReplayed: n%2 == 0, "raw": json.RawMessage(data)},
			Content:           []sdk.Content{&sdk.TextContent{Text: text}},
			StructuredContent: json.RawMessage(data),
			IsError:           n%3 == 0,
		}
		for _, idv := range []any{float64(n), text} {
			id, err := jsonrpc.MakeID(idv)
			if err != nil {
				t.Fatal(err)
			}
			want, wantOK := sdkAnswer(t, id, res, info, newProtocol)
			got, ok := appendAnswer(nil, id, res, info, newProtocol)
			if ok && (!wantOK || string(got) != want) {
				t.Fatalf("appendAnswer: %s\nSDK (%v): %s", got, wantOK, want)
			}
			if !ok && wantOK && json.Valid([]byte(data)) && len(data) > 0 {
				t.Fatalf("appendAnswer refused what the SDK encodes: %s", want)
			}
		}
	})
}
