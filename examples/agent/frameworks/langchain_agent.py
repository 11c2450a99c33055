# LangChain (langchain-mcp-adapters): Carmy as a Streamable HTTP server, and
# a tool-call interceptor that puts the model's tool-call id in _meta as
# carmy/request_id, so a retried tool call is replayed, not run again. Not
# run here (no Python package registry); it follows the adapters' documented
# configuration.
import os
from langchain_mcp_adapters.client import MultiServerMCPClient

client = MultiServerMCPClient({
    "carmy": {
        "transport": "streamable_http",
        "url": "http://127.0.0.1:8080/mcp",
        "headers": {"Authorization": f"Bearer {os.environ['CARMY_TOKEN']}"},
    }
})

async def with_request_id(request, handler):
    # request.meta is sent as the tools/call's _meta.
    request.meta = {**(request.meta or {}), "carmy/request_id": request.tool_call_id}
    return await handler(request)
