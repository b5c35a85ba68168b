"""Two 2026-07-28 clients of the Python `mcp` SDK on the broker's MCP face, each with its own
bearer token, listening for the same resource of a server behind it.

`python face_listen_two.py URL URI TOOL OWNER_TOKEN OTHER_TOKEN`: the owner (who may read the
resource) listens for URI and calls TOOL (arguments {"text": ...}) until it hears of an update;
then, while the owner still listens, the other caller (who may call TOOL but not read the
resource) listens for URI too and calls TOOL three times. Prints one JSON line:
{"owner_honored": [...], "other_honored": [...], "owner_heard": URI or null (an update caused
by the other's calls), "other_heard": URI or null (within 3 s of its calls)}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def client(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), mode="auto")


async def next_update(subscription: Any, within: float) -> str | None:
    """The URI of the next resource update on `subscription`, or None if none comes in time."""
    try:
        async with asyncio.timeout(within):
            while True:
                event = await anext(subscription)
                if getattr(event, "uri", None) is not None:
                    return str(event.uri)
    except TimeoutError:
        return None


async def main(url: str, uri: str, tool: str, owner_token: str, other_token: str) -> None:
    async with client(url, owner_token) as owner, client(url, other_token) as other:
        async with owner.listen(resource_subscriptions=[uri]) as owned:
            owner_honored = owned.honored.resource_subscriptions or []
            # The face acknowledges before its upstream subscription is made: touch until heard.
            for attempt in range(30):
                await owner.call_tool(tool, {"text": f"owner {attempt}"})
                if await next_update(owned, 1) is not None:
                    break
            else:
                raise TimeoutError("the owner heard of no update")
            async with other.listen(resource_subscriptions=[uri]) as others:
                other_honored = others.honored.resource_subscriptions or []
                for attempt in range(3):
                    await other.call_tool(tool, {"text": f"other {attempt}"})
                owner_heard = await next_update(owned, 10)
                other_heard = await next_update(others, 3)
    print(
        json.dumps(
            {
                "owner_honored": owner_honored,
                "other_honored": other_honored,
                "owner_heard": owner_heard,
                "other_heard": other_heard,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
