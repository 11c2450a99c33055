package mcp

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/jsonscan"
	"github.com/carmyhq/carmy/store"
)

// Upstreams is what the upstream MCP servers of a node offer besides
// tools (docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway), which /mcp passes through read-only;
// *mcpgateway.Directory implements it. Resources and templates are
// named carmy:<server>/<upstream URI>, prompts <server>.<prompt>.
//
// Every method takes see, which tells whether the caller may see a
// server's resources and prompts: what it may not see is neither listed
// nor forwarded. ReadResource and GetPrompt answer an error of code
// NOT_FOUND (store.CodeOf) for a name no server the caller may see
// holds, the upstream's *jsonrpc.Error as it answered, or another coded
// error (UNAVAILABLE, RESULT_TOO_LARGE) when no usable answer came.
type Upstreams interface {
	Resources(see func(server string) bool) []*sdk.Resource
	ResourceTemplates(see func(server string) bool) []*sdk.ResourceTemplate
	Prompts(see func(server string) bool) []*sdk.Prompt
	ReadResource(ctx context.Context, uri string, see func(server string) bool) (*sdk.ReadResourceResult, error)
	GetPrompt(ctx context.Context, name string, args map[string]string, see func(server string) bool) (*sdk.GetPromptResult, error)
	// Offers reports whether some server declares resources, and prompts.
	Offers() (resources, prompts bool)
	// Generation changes whenever a server's resources, templates or
	// prompts change.
	Generation() uint64
	// Changed is signalled after a server was listed (its tools, its
	// resources or its prompts may have changed). One reader.
	Changed() <-chan struct{}
}

// CodeUpstreamError is the JSON-RPC error code of a resources/read or
// prompts/get that got no usable answer from its upstream (it could not
// be reached, its answer was over the result limit): a code JSON-RPC
// leaves to the server. Its data is the error object of docs/errors.md (code
// UNAVAILABLE or RESULT_TOO_LARGE).
const CodeUpstreamError = -32030

// passthroughMethods are the methods answered from Config.Upstreams.
var passthroughMethods = map[string]bool{
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"prompts/list": true, "prompts/get": true,
}

// seer returns whether caller may see a server's resources and prompts
// (engine.Caller.MaySeeServer); a caller unknown (nil) sees none.
func seer(caller *engine.Caller) func(server string) bool {
	if caller == nil {
		return func(string) bool { return false }
	}
	return caller.MaySeeServer
}

// passthrough answers a method of passthroughMethods from Config.Upstreams.
func (h *Handler) passthrough(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
	see := seer(callerOf(req.GetExtra(), h.cfg.Anonymous))
	ups := h.cfg.Upstreams
	private := sdk.Cacheable{CacheScope: "private"}
	switch r := req.(type) {
	case *sdk.ListResourcesRequest:
		if r.Params != nil && r.Params.Cursor != "" {
			return nil, errInvalidCursor
		}
		return &sdk.ListResourcesResult{Cacheable: private, Resources: ups.Resources(see)}, nil
	case *sdk.ListResourceTemplatesRequest:
		if r.Params != nil && r.Params.Cursor != "" {
			return nil, errInvalidCursor
		}
		return &sdk.ListResourceTemplatesResult{Cacheable: private, ResourceTemplates: ups.ResourceTemplates(see)}, nil
	case *sdk.ListPromptsRequest:
		if r.Params != nil && r.Params.Cursor != "" {
			return nil, errInvalidCursor
		}
		return &sdk.ListPromptsResult{Cacheable: private, Prompts: ups.Prompts(see)}, nil
	case *sdk.ReadResourceRequest:
		if r.Params == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
		}
		res, err := ups.ReadResource(ctx, r.Params.URI, see)
		if err != nil {
			if store.CodeOf(err) == store.CodeNotFound {
				return nil, sdk.ResourceNotFoundError(r.Params.URI)
			}
			return nil, h.upstreamError(method, err)
		}
		res.Cacheable = private
		return res, nil
	case *sdk.GetPromptRequest:
		if r.Params == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
		}
		res, err := ups.GetPrompt(ctx, r.Params.Name, r.Params.Arguments, see)
		if err != nil {
			if store.CodeOf(err) == store.CodeNotFound {
				// As the SDK answers a prompt it does not hold.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", r.Params.Name)}
			}
			return nil, h.upstreamError(method, err)
		}
		return res, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
}

var errInvalidCursor = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: every list is answered in one page"}

// upstreamError is the JSON-RPC error of a forwarded request that failed.
func (h *Handler) upstreamError(method string, err error) error {
	var we *jsonrpc.Error
	switch {
	case errors.As(err, &we):
		return we
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	}
	code := store.CodeOf(err)
	if code == "" {
		h.log.Error("mcp: a forwarded request failed", "method", method, "err", err)
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
	}
	data, mErr := jsonscan.MarshalNoHTML(envelope(code, nil, err.Error()))
	if mErr != nil {
		data = nil
	}
	return &jsonrpc.Error{Code: CodeUpstreamError, Message: err.Error(), Data: data}
}

// patchCapabilities is patchInitialize, and with upstreams the
// list_changed notifications Carmy sends (listen.go) and the resources
// and prompts some upstream offers now.
func (h *Handler) patchCapabilities(result map[string]any, version string) {
	patchInitialize(result, version)
	caps, _ := result["capabilities"].(map[string]any)
	if caps == nil || h.cfg.Upstreams == nil {
		return
	}
	tools, _ := caps["tools"].(map[string]any)
	if tools == nil {
		tools = map[string]any{}
		caps["tools"] = tools
	}
	tools["listChanged"] = true
	resources, prompts := h.cfg.Upstreams.Offers()
	if resources {
		caps["resources"] = map[string]any{"listChanged": true}
	}
	if prompts {
		caps["prompts"] = map[string]any{"listChanged": true}
	}
}
