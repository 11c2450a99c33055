# OpenAI Agents SDK: Carmy as a remote MCP server. Not run on the machines
# this project is built on (no Python package registry there); it follows
# the SDK's documented MCPServerStreamableHttp configuration.
import os
from agents import Agent, Runner
from agents.mcp import MCPServerStreamableHttp

async def main(run_id: str) -> None:
    async with MCPServerStreamableHttp(params={
        "url": "http://127.0.0.1:8080/mcp",
        "headers": {
            "Authorization": f"Bearer {os.environ['CARMY_TOKEN']}",
            # One session per agent run: retries of a step within the run
            # share it, so a stable carmy/request_id in _meta (or a dedupe
            # window on the tool) makes them one call.
            "Carmy-Session-Id": run_id,
        },
    }) as carmy:
        agent = Agent(name="orders", mcp_servers=[carmy])
        print(await Runner.run(agent, "Order one KB-01 keyboard."))
