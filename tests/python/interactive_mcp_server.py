"""An interactive MCP server for the tests: the Python `mcp` SDK 2.x calling back to its client.

It is the upstream of the integration tests of streaming calls (progress notifications), of
server-to-client requests (elicitation, sampling), of resources (text, a 1 MiB blob, a template)
and of prompts, and of the list_changed notifications of resources and prompts. It speaks the
handshake protocol (`initialize`, up to 2025-11-25) only, where a server may send requests to
its client while it serves a tool call: it answers `server/discover` with an error, as a server
from before 2026-07-28 does, so a client that probes falls back to `initialize` (on stdio it
runs the SDK's handshake-only loop instead of its dual-era one).

Tools:
- `slow(seconds, every=0.4)` runs `seconds`, sending `notifications/progress` every `every`
  seconds (when the call carries a progress token): progress = steps done, total = number of
  steps (ceil(seconds / every)), message "step i of n"; returns text "slept {seconds}s".
- `ask(question)` sends `elicitation/create` (form mode) with the question as message and the
  requested schema `{"type": "object", "properties": {"answer": {"type": "string"}},
  "required": ["answer"]}`; returns text "accepted: <answer>", "declined" or "cancelled".
- `visit(url)` sends `elicitation/create` in URL mode (message "please visit", the url, and the
  elicitation id "visit-<len(url)>"); returns text "visit: accept", "visit: decline" or
  "visit: cancel".
- `sample(prompt)` sends `sampling/createMessage` with the prompt as the one user message and
  maxTokens 50; returns text "model said: <text>", or a tool error (isError) with text
  "sampling failed: <message>" when the client answers with an error.
  Both send their request whatever capabilities the client declared (a client without the
  capability is expected to answer with an error: `ask` then fails with "elicitation failed:
  <message>"). Server-to-client request ids are the server's own: 1, 2, ... per connection.
- `add_resource(name, text)` adds the text resource `memo://<name>` (or replaces its text) and
  sends `notifications/resources/list_changed`; `add_prompt(name)` adds a prompt without
  arguments whose one user message is "prompt <name>" and sends
  `notifications/prompts/list_changed`. Both notifications ride the tool call's own stream, so
  they reach the client before the call's result (on streamable HTTP: its POST's SSE stream).
  The server advertises `listChanged` for resources and prompts (not for tools).

- `chatty(count)` sends `count` log messages (`notifications/message`, logger "chatty", data
  "line i"), at levels debug, info, warning in turn, then returns text "logged <count>".

- `roots()` asks the client for its roots (`roots/list`) and returns their URIs as a JSON list.

Resources: `memo://hello` (text/plain, "hello, world"); `blob://one-mib`
(application/octet-stream, 1048576 bytes, byte i = i % 251, sent base64 as `blob`); the
template `memo://{name}`, which reads back any memo (an unknown one is the SDK's JSON-RPC error
-32602 "Unknown resource: memo://<name>", with data {"uri": ...}).

Prompts: `greet(name, style?)`, one user message "Say hello to <name>" (+ " in a <style> style").
With --asking-prompt also `interview(topic)`, which while it is being got logs "interviewing
about <topic>" (info, logger "interview") and asks the client (`elicitation/create`, form mode,
message "what about <topic>?", the schema above); its one user message is "interview about
<topic>: " + "accepted: <answer>" / "declined" / "cancelled" / "elicitation failed: <message>".

Usage: interactive_mcp_server.py [--asking-prompt]            (stdio)
       interactive_mcp_server.py --http 0   (streamable HTTP at http://127.0.0.1:PORT/mcp)
With --http it prints one JSON line, {"listening": true, "url": "http://127.0.0.1:PORT/mcp"},
once it accepts connections. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import time
import warnings
from typing import Annotated, Any

import anyio
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.mcpserver.resources.types import FunctionResource
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import (
    METHOD_NOT_FOUND,
    CallToolResult,
    PromptListChangedNotification,
    ResourceListChangedNotification,
    SamplingMessage,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field
from serving import serve_mcp

# Sampling is deprecated as of protocol 2026-07-28; this fixture speaks the handshake era on purpose.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

ONE_MIB = bytes(i % 251 for i in range(1 << 20))

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


def text_result(text: str, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


async def elicited(ctx: Context, question: str) -> str:
    """Asks the client `question` (form mode) and says what came back."""
    try:
        result = await ctx.session.elicit_form(question, ANSWER_SCHEMA, related_request_id=ctx.request_id)
    except MCPError as error:
        return f"elicitation failed: {error.message}"
    if result.action == "accept":
        return f"accepted: {(result.content or {}).get('answer')}"
    return "declined" if result.action == "decline" else "cancelled"


def add_asking_prompt(server: MCPServer) -> None:
    """The prompt `interview(topic)`, which logs and asks the client while it is being got."""

    @server.prompt(description="Logs and asks the client about the topic while it is being got.")
    async def interview(topic: str, ctx: Context) -> str:
        await ctx.info(f"interviewing about {topic}", logger_name="interview")
        return f"interview about {topic}: " + await elicited(ctx, f"what about {topic}?")


async def legacy_only(ctx: Any, call_next: Any) -> Any:
    """Answers `server/discover` as a server that predates 2026-07-28 does."""
    if ctx.method == "server/discover":
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found")
    return await call_next(ctx)


async def serve_stdio_legacy(server: MCPServer) -> None:
    """Serves stdio with the handshake only (`MCPServer.run("stdio")` would serve both eras)."""
    lowlevel = server._lowlevel_server  # noqa: SLF001 - the SDK's era choice has no public knob
    async with stdio_server() as (read_stream, write_stream):
        async with lowlevel.lifespan(lowlevel) as state:
            await serve_loop(
                lowlevel,
                read_stream,
                write_stream,
                lifespan_state=state,
                init_options=lowlevel.create_initialization_options(),
            )


def build() -> MCPServer:
    server = MCPServer(
        name="interactive-test-server", version="1.0.0", log_level="WARNING", middleware=[legacy_only]
    )

    # MCPServer builds its initialize result with `create_initialization_options()` and no
    # NotificationOptions, on stdio and on streamable HTTP alike, so listChanged would be false.
    lowlevel = server._lowlevel_server  # noqa: SLF001 - the SDK has no public knob for this
    create_options = lowlevel.create_initialization_options

    def with_list_changed(notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any):
        options = notification_options or NotificationOptions(prompts_changed=True, resources_changed=True)
        return create_options(options, *args, **kwargs)

    lowlevel.create_initialization_options = with_list_changed  # type: ignore[method-assign]

    memos: dict[str, str] = {}

    def add_memo(name: str, text: str) -> bool:
        """Sets memo `name`; True when it is new (then `memo://<name>` is listed from now on)."""
        new = name not in memos
        memos[name] = text
        if new:
            server.add_resource(
                FunctionResource(
                    uri=f"memo://{name}",
                    name=name,
                    description=f"The memo {name}.",
                    mime_type="text/plain",
                    fn=lambda: memos[name],
                )
            )
        return new

    add_memo("hello", "hello, world")

    @server.resource(
        "blob://one-mib",
        name="one-mib",
        description="1 MiB of binary data: byte i is i % 251.",
        mime_type="application/octet-stream",
    )
    def one_mib() -> bytes:
        return ONE_MIB

    @server.resource("memo://{name}", name="memo", description="A memo, by name.", mime_type="text/plain")
    def read_memo(name: str) -> str:
        if name not in memos:
            raise ResourceNotFoundError(f"Unknown resource: memo://{name}")
        return memos[name]

    @server.prompt(description="Asks the model to greet someone, optionally in a given style.")
    def greet(
        name: Annotated[str, Field(description="Who to greet.")],
        style: Annotated[str | None, Field(description="The style of the greeting, e.g. pirate.")] = None,
    ) -> str:
        text = f"Say hello to {name}"
        if style:
            text += f" in a {style} style"
        return text

    @server.tool(structured_output=False)
    async def slow(seconds: float, ctx: Context, every: float = 0.4) -> str:
        """Runs `seconds`, reporting progress every `every` seconds."""
        if seconds < 0 or every <= 0:
            raise ToolError("seconds must be >= 0 and every > 0")
        steps = max(1, math.ceil(seconds / every - 1e-9))
        start = time.monotonic()
        for i in range(1, steps + 1):
            await anyio.sleep(max(0.0, start + min(i * every, seconds) - time.monotonic()))
            await ctx.report_progress(i, steps, f"step {i} of {steps}")
        return f"slept {seconds}s"

    @server.tool(structured_output=False)
    async def chatty(count: int, ctx: Context) -> str:
        """Logs `count` messages (debug, info, warning in turn), then answers."""
        for i in range(1, count + 1):
            log = (ctx.debug, ctx.info, ctx.warning)[(i - 1) % 3]
            await log(f"line {i}", logger_name="chatty")
        return f"logged {count}"

    @server.tool()
    async def ask(question: str, ctx: Context) -> CallToolResult:
        """Asks the user the question (elicitation, form mode) and returns the answer."""
        try:
            result = await ctx.session.elicit_form(question, ANSWER_SCHEMA, related_request_id=ctx.request_id)
        except MCPError as error:
            return text_result(f"elicitation failed: {error.message}", is_error=True)
        if result.action == "accept":
            answer = (result.content or {}).get("answer")
            if not isinstance(answer, str):
                return text_result(f"accepted without a string answer: {result.content!r}", is_error=True)
            return text_result(f"accepted: {answer}")
        return text_result("declined" if result.action == "decline" else "cancelled")

    @server.tool()
    async def visit(url: str, ctx: Context) -> CallToolResult:
        """Asks the user to visit `url` (elicitation, URL mode) and returns what they did."""
        result = await ctx.session.elicit_url(
            "please visit", url, f"visit-{len(url)}", related_request_id=ctx.request_id
        )
        return text_result(f"visit: {result.action}")

    @server.tool()
    async def sample(prompt: str, ctx: Context) -> CallToolResult:
        """Asks the client's model (sampling) to answer the prompt."""
        try:
            result = await ctx.session.create_message(
                [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
                max_tokens=50,
                related_request_id=ctx.request_id,
            )
        except MCPError as error:
            return text_result(f"sampling failed: {error.message}", is_error=True)
        blocks = result.content if isinstance(result.content, list) else [result.content]
        text = "".join(getattr(block, "text", "") for block in blocks)
        return text_result(f"model said: {text}")

    @server.tool(structured_output=False)
    async def roots(ctx: Context) -> str:
        """Asks the client for its roots (roots/list) and returns their URIs as a JSON list."""
        result = await ctx.session.list_roots()
        return json.dumps([str(root.uri) for root in result.roots])

    async def list_changed(ctx: Context, notification: Any) -> None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # 2026-07-28: delivered by the subscription bus to subscriptions/listen streams
        await ctx.session.send_notification(notification, related_request_id=ctx.request_id)

    @server.tool(structured_output=False)
    async def add_resource(name: str, text: str, ctx: Context) -> str:
        """Adds (or replaces) the text resource memo://<name>; sends resources/list_changed."""
        if not name or "/" in name:
            raise ToolError("name must be non-empty and without '/'")
        new = add_memo(name, text)
        await ctx.notify_resources_changed()
        await list_changed(ctx, ResourceListChangedNotification())
        return f"{'added' if new else 'replaced'} memo://{name}"

    @server.tool(structured_output=False)
    async def add_prompt(name: str, ctx: Context) -> str:
        """Adds a prompt without arguments, one user message "prompt <name>"; sends prompts/list_changed."""
        if not name:
            raise ToolError("name must be non-empty")
        text = f"prompt {name}"
        server.add_prompt(Prompt.from_function(lambda: text, name=name, description=f"The prompt {name}."))
        await ctx.notify_prompts_changed()
        await list_changed(ctx, PromptListChangedNotification())
        return f"added prompt {name}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT (0: any)")
    parser.add_argument("--asking-prompt", action="store_true", help="add the prompt `interview`, which asks")
    args = parser.parse_args()
    server = build()
    if args.asking_prompt:
        add_asking_prompt(server)
    if args.http is None:
        anyio.run(serve_stdio_legacy, server)
    else:
        asyncio.run(serve_mcp(server, args.http))


if __name__ == "__main__":
    main()
