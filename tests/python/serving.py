"""Serving a test fixture's ASGI app on a socket bound beforehand, shared by the fixtures."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from typing import Any

import uvicorn


def bind(port: int) -> socket.socket:
    """A socket bound to 127.0.0.1:port (0: any free port), so the URL is known before the app is built."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


async def serve(app: Any, sock: socket.socket, url: str) -> None:
    """Serves `app` on `sock`; once it accepts, prints the line the tests wait for: {"listening": true, "url": ...}."""
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            serving.result()
            sys.exit("the server stopped before it started")
        await asyncio.sleep(0.01)
    print(json.dumps({"listening": True, "url": url}), flush=True)
    await serving


async def serve_mcp(server: Any, port: int) -> None:
    """Serves an `MCPServer`'s streamable HTTP app at http://127.0.0.1:PORT/mcp (0: any port)."""
    sock = bind(port)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    await serve(server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1"), sock, url)
