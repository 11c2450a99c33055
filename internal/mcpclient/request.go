package mcpclient

import (
	"net/http"

	"github.com/carmyhq/carmy/internal/jsonscan"
	"github.com/carmyhq/carmy/internal/mcpversion"
)

// MethodCallTool is the method of a tool call.
const MethodCallTool = "tools/call"

// The protocol's own _meta keys of a request at a stateless version.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// Headers returns the HTTP headers of a request of method at version, as
// a Streamable HTTP client sends them: Content-Type, Accept (JSON and an
// event stream) and Mcp-Protocol-Version; at a stateless version also
// Mcp-Method and, when name is not empty (the tool of a tools/call),
// Mcp-Name.
func Headers(version, method, name string) http.Header {
	h := http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {version},
	}
	if mcpversion.For(version).Stateless {
		h["Mcp-Method"] = []string{method}
		if name != "" {
			h["Mcp-Name"] = []string{name}
		}
	}
	return h
}

// ProtocolMeta returns the protocol's own _meta members of a request of
// client at version: at a stateless version the version, the client's
// name (clientInfo, version "1") and its capabilities (none); nil before.
func ProtocolMeta(version, client string) map[string]any {
	if !mcpversion.For(version).Stateless {
		return nil
	}
	return map[string]any{
		MetaProtocolVersion:    version,
		MetaClientInfo:         map[string]any{"name": client, "version": "1"},
		MetaClientCapabilities: map[string]any{},
	}
}

// AppendProtocolMeta appends ProtocolMeta's members to dst as members of
// a JSON object, each followed by a comma, in the order a client writes
// them (version, client, capabilities): for a body built once and sent
// many times. Before a stateless version it appends nothing.
func AppendProtocolMeta(dst []byte, version, client string) []byte {
	if !mcpversion.For(version).Stateless {
		return dst
	}
	dst = append(dst, `"`+MetaProtocolVersion+`":`...)
	dst = jsonscan.AppendString(dst, version, jsonscan.NoHTML)
	dst = append(dst, `,"`+MetaClientInfo+`":{"name":`...)
	dst = jsonscan.AppendString(dst, client, jsonscan.NoHTML)
	return append(dst, `,"version":"1"},"`+MetaClientCapabilities+`":{},`...)
}
