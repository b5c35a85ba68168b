"""An MCP client of the Python `mcp` SDK against the broker's MCP face (streamable HTTP).

Lists the tools and prompts, calls `d_echo`, calls `d_sleep` with a progress callback, and
prints what it saw as one JSON line: {"tools": [...], "echo": ..., "progress": [...],
"prompt": ...}.
"""

from __future__ import annotations

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main(url: str) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with streamable_http_client(url) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = [tool.name for tool in (await session.list_tools()).tools]
            echo = await session.call_tool("d_echo", {"message": "from python"})
            await session.call_tool("d_sleep", {"ms": 150, "steps": 3}, progress_callback=on_progress)
            prompts = [prompt.name for prompt in (await session.list_prompts()).prompts]
    print(
        json.dumps(
            {
                "tools": tools,
                "echo": echo.content[0].text,
                "progress": progress,
                "prompt": next(name for name in prompts if name == "d_summarize"),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
