"""An MCP client written with the Python `mcp` SDK, for `toolbroker mcp-stdio`: launches
`TOOLBROKER mcp-stdio --broker ADDR` as its stdio server, lists the tools, calls `ECHO` with a
message and `SLEEP` with a progress callback, and prints one JSON line of what it saw.

Usage: stdio_face_client.py TOOLBROKER ADDR ECHO SLEEP
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(toolbroker: str, addr: str, echo: str, sleep: str) -> dict:
    server = StdioServerParameters(command=toolbroker, args=["mcp-stdio", "--broker", addr])
    progress = []

    async def on_progress(done, total, message):
        progress.append({"progress": done, "total": total, "message": message})

    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            initialized = await session.initialize()
            tools = await session.list_tools()
            echoed = await session.call_tool(echo, {"message": "from Python"})
            slept = await session.call_tool(
                sleep, {"ms": 300, "steps": 3}, progress_callback=on_progress
            )
            return {
                "server": initialized.server_info.name,
                "tools_list_changed": initialized.capabilities.tools.list_changed,
                "tools": [t.name for t in tools.tools],
                "echo_schema": next(t.input_schema for t in tools.tools if t.name == echo),
                "echo": {
                    "is_error": bool(echoed.is_error),
                    "text": [c.text for c in echoed.content if c.type == "text"],
                },
                "sleep": [c.text for c in slept.content if c.type == "text"],
                "progress": progress,
            }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:5]))), flush=True)
