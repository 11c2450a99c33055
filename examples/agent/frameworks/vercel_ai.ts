// Vercel AI SDK: Carmy as a remote MCP server. Not run here (no npm
// registry); it follows the SDK's documented createMCPClient configuration.
import { experimental_createMCPClient as createMCPClient } from "ai";

export async function carmyTools(token: string) {
  const carmy = await createMCPClient({
    transport: {
      type: "http",
      url: "http://127.0.0.1:8080/mcp",
      headers: { Authorization: `Bearer ${token}` },
    },
  });
  return carmy.tools();
}
