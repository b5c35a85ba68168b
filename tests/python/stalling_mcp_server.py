"""A stdio MCP server that stops reading its stdin on command, and checks every line it reads.

It is the upstream of tests/it/stalled_stdin.rs: a busy server whose stdin pipe fills while the
broker has calls to send, some of whose callers give up mid-write. It speaks newline-delimited
JSON-RPC 2.0 by hand (standard library only), so that what it reads is exactly what the broker
wrote: no SDK buffers, reorders or skips a line.

Every line it reads must be one complete JSON-RPC 2.0 message (a JSON object with "jsonrpc":
"2.0"). Any other line is counted and reported at once on stderr, which the broker logs, as
`BAD LINE: <length> bytes: <start>`.

Tools:
- `echo(message)` returns the message unchanged, as text.
- `stall(ms)` answers "stalling <ms> ms", then reads nothing for `ms` milliseconds.
- `report()` returns, as JSON text, what it read: {"bad": <bad lines>, "read": <lines>,
  "first": <the first bad line's start, or null>, "echoed": [<tag>, ...], "cancelled": [<tag>,
  ...], "cancelled_unknown": <count>}. A message's tag is its text up to its first ":";
  `echoed` lists the tags of the `echo` requests read, in order, and `cancelled` those of the
  requests a `notifications/cancelled` read named; `cancelled_unknown` counts cancellations of
  ids it never read a request for.

Usage: stalling_mcp_server.py (stdio only).
"""

from __future__ import annotations

import json
import sys
import time

TOOLS = [
    {
        "name": "echo",
        "description": "Returns the given message unchanged, as text.",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
    },
    {
        "name": "stall",
        "description": "Answers, then reads nothing from stdin for ms milliseconds.",
        "inputSchema": {
            "type": "object",
            "properties": {"ms": {"type": "integer", "minimum": 0}},
            "required": ["ms"],
        },
    },
    {
        "name": "report",
        "description": "What was read: bad lines, echo requests and cancellations.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


class Server:
    def __init__(self) -> None:
        self.bad = 0
        self.read = 0
        self.first_bad: str | None = None
        # The tag of each echo request read, by request id.
        self.tags: dict[object, str] = {}
        self.echoed: list[str] = []
        self.cancelled: list[str] = []
        self.cancelled_unknown = 0
        self.stall_after = 0.0

    def check(self, raw: bytes) -> dict | None:
        """The message in `raw`, or None (counted and reported) when it is not one."""
        self.read += 1
        try:
            message = json.loads(raw)
        except ValueError:
            message = None
        if isinstance(message, dict) and message.get("jsonrpc") == "2.0":
            return message
        self.bad += 1
        start = raw[:80].decode("utf-8", "replace")
        if self.first_bad is None:
            self.first_bad = start
        print(f"BAD LINE: {len(raw)} bytes: {start}", file=sys.stderr, flush=True)
        return None

    def handle(self, message: dict) -> dict | None:
        method = message.get("method")
        params = message.get("params") or {}
        if method == "notifications/cancelled":
            tag = self.tags.get(params.get("requestId"))
            if tag is None:
                self.cancelled_unknown += 1
            else:
                self.cancelled.append(tag)
        if "id" not in message or method is None:
            return None
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stalling", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            arguments = params.get("arguments") or {}
            if params.get("name") == "echo":
                tag = str(arguments.get("message", "")).split(":", 1)[0]
                self.tags[message["id"]] = tag
                self.echoed.append(tag)
            result = self.call(params.get("name"), arguments)
        elif method == "ping":
            result = {}
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            return {"jsonrpc": "2.0", "id": message["id"], "error": error}
        return {"jsonrpc": "2.0", "id": message["id"], "result": result}

    def call(self, name: str, arguments: dict) -> dict:
        if name == "echo":
            text = arguments["message"]
        elif name == "stall":
            ms = int(arguments["ms"])
            self.stall_after = ms / 1000
            text = f"stalling {ms} ms"
        elif name == "report":
            text = json.dumps(
                {
                    "bad": self.bad,
                    "read": self.read,
                    "first": self.first_bad,
                    "echoed": self.echoed,
                    "cancelled": self.cancelled,
                    "cancelled_unknown": self.cancelled_unknown,
                }
            )
        else:
            return {"content": [{"type": "text", "text": f"no tool {name}"}], "isError": True}
        return {"content": [{"type": "text", "text": text}]}


def main() -> None:
    server = Server()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        raw = line.rstrip(b"\r\n")
        if not raw:
            continue
        message = server.check(raw)
        answer = server.handle(message) if message is not None else None
        if answer is not None:
            stdout.write(json.dumps(answer).encode() + b"\n")
            stdout.flush()
        if server.stall_after:
            # Busy: the broker's writes fill the pipe meanwhile.
            time.sleep(server.stall_after)
            server.stall_after = 0.0


if __name__ == "__main__":
    main()
