"""A 2026-07-28 client of the Python `mcp` SDK answering a call's questions through the
broker's MCP face, in rounds (`input_required`, then the call again with its answers).

`python face_rounds.py URL [PREFIX]` calls `py_ask` (elicitation: answered "blue") and
`py_sample` (sampling: answered "hi!") of the interactive test server behind the face (or the
`ask` and `sample` of the server whose tools have PREFIX), then `py_ask` again with a client
that declares no elicitation, and prints one JSON line (`--stdio PREFIX COMMAND ARGS...`: the
same through `toolbroker mcp-stdio` started as COMMAND ARGS):
{"version", "ask", "sample", "asked": [messages the callback saw], "unasked"}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types import CreateMessageResult, ElicitResult, TextContent


async def main(server: str | StdioServerParameters, prefix: str) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"answer": "blue"})

    async def on_sample(context: Any, params: Any) -> CreateMessageResult:
        asked.append(params.messages[0].content.text)
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="hi!"), model="test", stop_reason="endTurn"
        )

    async with Client(server, mode="auto", elicitation_callback=on_elicit, sampling_callback=on_sample) as client:
        version = client.protocol_version
        ask = await client.call_tool(f"{prefix}ask", {"question": "Favourite colour?"})
        sample = await client.call_tool(f"{prefix}sample", {"prompt": "Say hi"})
    async with Client(server, mode="auto") as plain:
        unasked = await plain.call_tool(f"{prefix}ask", {"question": "Anyone?"})
    print(
        json.dumps(
            {
                "version": version,
                "ask": ask.content[0].text,
                "sample": sample.content[0].text,
                "asked": asked,
                "unasked": unasked.content[0].text,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    if sys.argv[1] == "--stdio":
        command = sys.argv[3:]
        asyncio.run(main(StdioServerParameters(command=command[0], args=command[1:]), sys.argv[2]))
    else:
        asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "py_"))
