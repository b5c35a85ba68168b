"""The broker's MCP face as a 2026-07-28 client sees it: every method's result checked against
the protocol's published schema, and the Python `mcp` SDK's client driving the face in both of
its modes.

`python face_2026.py URL` (the face at /mcp) or `python face_2026.py --stdio COMMAND ARGS...`
(`toolbroker mcp-stdio`) prints one JSON line:
- "raw": for each method sent as a plain 2026-07-28 request (per-request `_meta`, no session),
  its `resultType`, `ttlMs` and `cacheScope`, and "invalid": the schema's complaint, if any
  (`mcp_types` validates against models generated from the schema of 2026-07-28);
- "modes": for the SDK's `Client` in "legacy" and "auto" mode, the protocol version it settled
  on and what it saw (tool names, the echo, the prompt's first message, the resource's text),
  or the error it raised.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx2 as httpx
from mcp import Client, StdioServerParameters
from mcp_types.methods import validate_server_result
from pydantic import ValidationError

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "face-2026-test", "version": "1"},
}

# Each method with its params, and the name its `Mcp-Name` header carries.
REQUESTS: list[tuple[str, dict[str, Any], str | None]] = [
    ("server/discover", {}, None),
    ("tools/list", {}, None),
    ("tools/call", {"name": "d_echo", "arguments": {"message": "raw"}}, "d_echo"),
    ("tools/call", {"name": "d_fail", "arguments": {"message": "raw"}}, "d_fail"),
    ("prompts/list", {}, None),
    ("prompts/get", {"name": "d_summarize", "arguments": {"topic": "MCP"}}, "d_summarize"),
    ("resources/list", {}, None),
    ("resources/templates/list", {}, None),
    ("resources/read", {"uri": "demo://readme"}, "demo://readme"),
    (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "d_summarize"}, "argument": {"name": "topic", "value": "M"}},
        None,
    ),
]


def answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer in a POST's response, JSON or one SSE event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if "id" in message:
                    return message
        raise AssertionError(f"no answer in the stream: {response.text!r}")
    return response.json()


def request(number: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 request: its protocol version and capabilities in its own `_meta`."""
    return {"jsonrpc": "2.0", "id": number, "method": method, "params": {**params, "_meta": META}}


def checked(method: str, message: dict[str, Any]) -> dict[str, Any]:
    """What a test needs to know of one answer."""
    row: dict[str, Any] = {"method": method}
    if "result" not in message:
        row["error"] = message.get("error")
        return row
    result = message["result"]
    row.update({key: result.get(key) for key in ("resultType", "ttlMs", "cacheScope")})
    try:
        validate_server_result(method, VERSION, result)
        row["invalid"] = None
    except (ValidationError, KeyError, ValueError) as error:
        row["invalid"] = str(error)
    return row


async def raw_http(url: str) -> list[dict[str, Any]]:
    seen = []
    async with httpx.AsyncClient(timeout=30) as http:
        for number, (method, params, name) in enumerate(REQUESTS, start=1):
            headers = {
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": VERSION,
                "Mcp-Method": method,
            }
            if name is not None:
                headers["Mcp-Name"] = name
            response = await http.post(url, json=request(number, method, params), headers=headers)
            seen.append({**checked(method, answer(response)), "status": response.status_code})
    return seen


async def raw_stdio(command: list[str]) -> list[dict[str, Any]]:
    """The same requests as lines on a new process's stdin, no `initialize` first."""
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    seen = []
    try:
        for number, (method, params, _) in enumerate(REQUESTS, start=1):
            process.stdin.write((json.dumps(request(number, method, params)) + "\n").encode())
            await process.stdin.drain()
            while True:
                line = await asyncio.wait_for(process.stdout.readline(), 30)
                if not line:
                    raise AssertionError(f"the bridge closed its stdout before answering {method}")
                message = json.loads(line)
                if message.get("id") == number:
                    break
            seen.append(checked(method, message))
    finally:
        process.stdin.close()
        await process.wait()
    return seen


async def drive(server: str | StdioServerParameters, mode: str) -> dict[str, Any]:
    try:
        async with Client(server, mode=mode) as client:
            tools = (await client.list_tools()).tools
            echo = await client.call_tool("d_echo", {"message": f"from {mode}"})
            prompt = await client.get_prompt("d_summarize", {"topic": "MCP"})
            readme = await client.read_resource("demo://readme")
            return {
                "version": client.protocol_version,
                "tools": len(tools),
                "titles": sorted(tool.title or "" for tool in tools if tool.name in ("d_echo", "d_add")),
                "echo": echo.content[0].text,
                "prompt": prompt.messages[0].content.text,
                "readme": readme.contents[0].text[:20],
            }
    except Exception as error:  # what the client raised is the finding
        return {"error": f"{type(error).__name__}: {error}"}


async def main(arguments: list[str]) -> None:
    if arguments[0] == "--stdio":
        command = arguments[1:]
        raw = await raw_stdio(command)
        server: str | StdioServerParameters = StdioServerParameters(command=command[0], args=command[1:])
    else:
        raw = await raw_http(arguments[0])
        server = arguments[0]
    seen = {"raw": raw, "modes": {mode: await drive(server, mode) for mode in ("legacy", "auto")}}
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
