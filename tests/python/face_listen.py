"""A 2026-07-28 client of the Python `mcp` SDK listening to the broker's MCP face.

`python face_listen.py URL` lists the resources, opens `subscriptions/listen` for the first
server-everything document (and a URI no server has), turns on server-everything's updates with
its `e_toggle-subscriber-updates` tool, waits for one `ResourceUpdated` event, turns them off,
and prints one JSON line: {"version", "honored": [URIs the face agreed to], "updated": URI}.
"""

from __future__ import annotations

import asyncio
import json
import sys

from mcp import Client


async def main(url: str) -> None:
    async with Client(url, mode="auto") as client:
        resources = (await client.list_resources()).resources
        uri = next(r.uri for r in resources if r.uri.startswith("demo://resource/static/document/"))
        async with client.listen(resource_subscriptions=[uri, "nowhere://x"]) as subscription:
            honored = subscription.honored.resource_subscriptions or []
            await client.call_tool("e_toggle-subscriber-updates", {})
            try:
                while True:
                    event = await asyncio.wait_for(anext(subscription), 30)
                    if getattr(event, "uri", None) is not None:
                        break
            finally:
                await client.call_tool("e_toggle-subscriber-updates", {})
        print(json.dumps({"version": client.protocol_version, "honored": honored, "updated": event.uri}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
