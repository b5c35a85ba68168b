"""An MCP server for the tests that speaks only protocol 2026-07-28 (the Python `mcp` SDK 2.x).

It refuses `initialize` with -32022 "Unsupported protocol version" and data
{"supported": ["2026-07-28"], ...}, as the spec says a server without the handshake does, so
a client must find it with `server/discover` and send every request stateless. It asks its
client only in rounds (MRTR): a tool that needs the user answers `input_required`.

Tools:
- `echo(text)` returns text "echo: <text>".
- `ask(question)`: unless the request declared the elicitation capability, a tool error
  "cannot ask: the request declared no elicitation"; otherwise answers `input_required` with
  one input request, key "who", `elicitation/create` (form, the question as message, schema
  {"answer": string, required}) and requestState "asked:<question>" (sealed by the SDK: a
  byte changed fails the retry). The retry with inputResponses {"who": ...} returns
  "accepted: <answer>" / "declined" / "cancelled"; a retry whose state is not the one given
  is a tool error "bad state: <state>".
- `sample(prompt)`: `input_required` with key "llm", `sampling/createMessage` (the prompt as
  the one user message, maxTokens 50), no requestState; the retry returns
  "model said: <text>".
- `grow(name)` adds the tool `<name>` (which returns "I am <name>") and tells
  `subscriptions/listen` streams that the tool list changed; returns "grew <name>".
- `where(region)` returns "region <region>"; `region` is sent as the header `Mcp-Param-Region`
  too (`x-mcp-header`), which a 2026-07-28 client must send and a server check.
- `touch(text)` sets the text of the resource `memo://note` and tells listen streams that
  subscribed to it that it was updated; returns "touched".

Resource: `memo://note` (text/plain, "first" until touched).

Usage: modern_mcp_server.py            (stdio)
       modern_mcp_server.py --http 0   (streamable HTTP at http://127.0.0.1:PORT/mcp)
With --http it prints one JSON line, {"listening": true, "url": "http://127.0.0.1:PORT/mcp"},
once it accepts connections. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import warnings
from typing import Annotated, Any

import mcp_types as t
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from pydantic import Field
from serving import serve_mcp

# Sampling is deprecated as of 2026-07-28 but remains an input request kind.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


async def modern_only(ctx: Any, call_next: Any) -> Any:
    """Refuses the handshake, as a server that speaks only 2026-07-28 does."""
    if ctx.method == "initialize":
        requested = (ctx.params or {}).get("protocolVersion", "")
        raise MCPError(
            code=t.UNSUPPORTED_PROTOCOL_VERSION,
            message="this server speaks only 2026-07-28",
            data={"supported": ["2026-07-28"], "requested": requested},
        )
    return await call_next(ctx)


def result(value: str, is_error: bool = False) -> t.CallToolResult:
    return t.CallToolResult(content=[t.TextContent(type="text", text=value)], is_error=is_error)


def build() -> MCPServer:
    server = MCPServer(name="modern-test-server", version="1.0.0", log_level="WARNING", middleware=[modern_only])
    note = {"text": "first"}

    @server.resource("memo://note", name="note", description="A note touch() changes.", mime_type="text/plain")
    def read_note() -> str:
        return note["text"]

    @server.tool()
    async def echo(text: str) -> t.CallToolResult:
        return result(f"echo: {text}")

    @server.tool()
    async def ask(question: str, ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
        answers = ctx.input_responses or {}
        if "who" in answers:
            if ctx.request_state != f"asked:{question}":
                return result(f"bad state: {ctx.request_state}", is_error=True)
            answer = answers["who"]
            if answer.action == "accept":
                return result(f"accepted: {(answer.content or {}).get('answer')}")
            return result("declined" if answer.action == "decline" else "cancelled")
        capabilities = ctx.client_capabilities
        if capabilities is None or capabilities.elicitation is None:
            return result("cannot ask: the request declared no elicitation", is_error=True)
        return t.InputRequiredResult(
            input_requests={
                "who": t.ElicitRequest(
                    params=t.ElicitRequestFormParams(message=question, requested_schema=ANSWER_SCHEMA)
                )
            },
            request_state=f"asked:{question}",
        )

    @server.tool()
    async def sample(prompt: str, ctx: Context) -> t.CallToolResult | t.InputRequiredResult:
        answers = ctx.input_responses or {}
        if "llm" in answers:
            content = answers["llm"].content
            blocks = content if isinstance(content, list) else [content]
            said = "".join(getattr(block, "text", "") for block in blocks)
            return result(f"model said: {said}")
        message = t.SamplingMessage(role="user", content=t.TextContent(type="text", text=prompt))
        return t.InputRequiredResult(
            input_requests={
                "llm": t.CreateMessageRequest(params=t.CreateMessageRequestParams(messages=[message], max_tokens=50))
            }
        )

    @server.tool()
    async def grow(name: str, ctx: Context) -> t.CallToolResult:
        def grown() -> str:
            return f"I am {name}"

        server.add_tool(grown, name=name, description=f"The grown tool {name}.")
        await ctx.notify_tools_changed()
        return result(f"grew {name}")

    @server.tool(name="where")
    async def where_tool(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    ) -> t.CallToolResult:
        return result(f"region {region}")

    @server.tool()
    async def touch(text: str, ctx: Context) -> t.CallToolResult:
        note["text"] = text
        await ctx.notify_resource_updated("memo://note")
        return result("touched")

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT (0: any)")
    args = parser.parse_args()
    server = build()
    if args.http is None:
        server.run("stdio")
    else:
        asyncio.run(serve_mcp(server, args.http))


if __name__ == "__main__":
    main()
