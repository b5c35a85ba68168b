"""A 2026-07-28 client of the Python `mcp` SDK listening to the broker's MCP face.

`python face_listen.py URL` lists the resources, opens `subscriptions/listen` for the first
server-everything document (and a URI no server has), turns on server-everything's updates with
its `e_toggle-subscriber-updates` tool, waits for one `ResourceUpdated` event, turns them off,
and prints one JSON line: {"version", "honored": [URIs the face agreed to], "updated": URI}.

`python face_listen.py URL URI TOOL ARGUMENTS_JSON` listens for URI (and the URI no server
has) instead, calls TOOL with the arguments (again each second until an update comes: the
face acknowledges a listen before its upstream subscription is made), and prints the same way.
"""

from __future__ import annotations

import asyncio
import json
import sys

from mcp import Client

TOGGLE = "e_toggle-subscriber-updates"


async def main(url: str, chosen: list[str]) -> None:
    async with Client(url, mode="auto") as client:
        if chosen:
            uri, tool, arguments = chosen[0], chosen[1], json.loads(chosen[2])
        else:
            resources = (await client.list_resources()).resources
            uri = next(r.uri for r in resources if r.uri.startswith("demo://resource/static/document/"))
            tool, arguments = TOGGLE, {}
        async with client.listen(resource_subscriptions=[uri, "nowhere://x"]) as subscription:
            honored = subscription.honored.resource_subscriptions or []
            await client.call_tool(tool, arguments)
            try:
                for _ in range(30):
                    try:
                        event = await asyncio.wait_for(anext(subscription), 1 if chosen else 30)
                    except TimeoutError:
                        if not chosen:
                            raise
                        await client.call_tool(tool, arguments)
                        continue
                    if getattr(event, "uri", None) is not None:
                        break
                else:
                    raise TimeoutError("no update came")
            finally:
                if tool == TOGGLE:
                    await client.call_tool(TOGGLE, {})
        print(json.dumps({"version": client.protocol_version, "honored": honored, "updated": event.uri}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
