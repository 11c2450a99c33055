# LangChain: a Carmy tool whose calls carry carmy/request_id in the MCP
# _meta, so a retried tool call is replayed, not run again.
#
# langchain-mcp-adapters' MultiServerMCPClient has no documented way to set
# a tools/call's _meta, so this calls Carmy through a plain MCP client
# session (the MCP Python SDK: ClientSession.call_tool(..., meta=...)) and
# wraps that as a LangChain tool. The request id is the model's tool-call
# id (InjectedToolCallId), stable across retries of that call. Not run
# here (no Python package registry): it follows the SDKs' documented APIs.
import os
from typing import Annotated

from langchain_core.tools import InjectedToolCallId, tool
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

CARMY_URL = "http://127.0.0.1:8080/mcp"
HEADERS = {"Authorization": f"Bearer {os.environ['CARMY_TOKEN']}"}


async def call_carmy(name: str, arguments: dict, request_id: str):
    async with streamablehttp_client(CARMY_URL, headers=HEADERS) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            # meta is sent as the tools/call's _meta.
            return await session.call_tool(name, arguments, meta={"carmy/request_id": request_id})


@tool
async def create_order(sku: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Create an order for sku (once, however often the call is retried)."""
    result = await call_carmy("create_order", {"sku": sku}, request_id=tool_call_id)
    return "".join(c.text for c in result.content if c.type == "text")

# Give create_order to the agent: e.g. create_agent(model, tools=[create_order]).
