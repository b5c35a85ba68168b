#!/usr/bin/env python3
"""A Python agent of toolbroker: list the tools, hand them to an LLM API, call one, watch changes.

Run it (from the repository root, with a broker running, e.g. `cargo run --release`):

    python3 -m venv examples/python-agent/.venv
    examples/python-agent/.venv/bin/pip install -r examples/python-agent/requirements.txt
    examples/python-agent/.venv/bin/python examples/python-agent/agent.py [ADDR] [--watch-seconds N] [--demo-change]

ADDR defaults to $TOOLBROKER_ADDR, else 127.0.0.1:50051. If $TOOLBROKER_TOKEN is set it is sent
as `authorization: Bearer <token>`. The gRPC stubs are generated from
proto/toolbroker/v1/broker.proto into examples/python-agent/gen/ on first run (grpcio-tools).
--demo-change calls the demo server's `add_tool` once Watch has started, so a ToolsChanged
event follows.
"""

import argparse
import json
import os
import sys
from importlib import resources
from pathlib import Path

import grpc

HERE = Path(__file__).resolve().parent
PROTO_ROOT = HERE.parent.parent / "proto"
PROTO = PROTO_ROOT / "toolbroker" / "v1" / "broker.proto"
GEN = HERE / "gen"


def load_stubs():
    """Generates the Python stubs from the .proto (when missing or stale) and imports them."""
    out = GEN / "toolbroker" / "v1" / "broker_pb2_grpc.py"
    if not out.exists() or out.stat().st_mtime < PROTO.stat().st_mtime:
        from grpc_tools import protoc

        GEN.mkdir(exist_ok=True)
        well_known = resources.files("grpc_tools") / "_proto"  # google/protobuf/*.proto
        args = ["protoc", f"-I{PROTO_ROOT}", f"-I{well_known}", f"--python_out={GEN}",
                f"--grpc_python_out={GEN}", str(PROTO)]
        if protoc.main(args) != 0:
            sys.exit(f"could not generate stubs from {PROTO}")
    sys.path.insert(0, str(GEN))
    from toolbroker.v1 import broker_pb2, broker_pb2_grpc

    return broker_pb2, broker_pb2_grpc


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("addr", nargs="?",
                        default=os.environ.get("TOOLBROKER_ADDR", "127.0.0.1:50051"))
    parser.add_argument("--watch-seconds", type=float, default=3.0)
    parser.add_argument("--demo-change", action="store_true")
    args = parser.parse_args()

    pb, pb_grpc = load_stubs()
    token = os.environ.get("TOOLBROKER_TOKEN")
    metadata = [("authorization", f"Bearer {token}")] if token else []
    stub = pb_grpc.ToolBrokerStub(grpc.insecure_channel(args.addr))

    # 1. The tools, as function-calling JSON for two LLM APIs: the raw JSON Schema is the
    #    parameters / input_schema as it is.
    tools = stub.ListTools(pb.ListToolsRequest(), metadata=metadata, timeout=10).tools
    openai = [{"type": "function",
               "function": {"name": t.name, "description": t.description,
                            "parameters": json.loads(t.input_schema_json)}} for t in tools]
    anthropic = [{"name": t.name, "description": t.description,
                  "input_schema": json.loads(t.input_schema_json)} for t in tools]
    print("## OpenAI tools")
    print(json.dumps(openai, indent=2))
    print("## Anthropic tools")
    print(json.dumps(anthropic, indent=2))

    # 2. A call, as the agent would make when the model asks for it.
    result = stub.CallTool(pb.CallToolRequest(name="echo", arguments_json=json.dumps(
        {"message": "hello from python"})), metadata=metadata, timeout=30)
    print(f"## echo result{' (tool error)' if result.is_error else ''}")
    print(result.text)

    # 3. Watch: a snapshot first, then one line per change, for --watch-seconds.
    print("## Watch")
    events = stub.Watch(pb.WatchRequest(), metadata=metadata, timeout=args.watch_seconds)
    try:
        for event in events:
            kind = event.WhichOneof("event")
            if kind == "snapshot":
                servers = ", ".join(f"{s.name}={pb.ServerState.Name(s.state)}"
                                    for s in event.snapshot.servers)
                print(f"revision {event.revision}: snapshot: {len(event.snapshot.tools)} tools;"
                      f" servers: {servers}")
                if args.demo_change:
                    stub.CallTool(pb.CallToolRequest(name="add_tool", arguments_json=json.dumps(
                        {"name": "added_by_python"})), metadata=metadata, timeout=30)
            elif kind == "tools_changed":
                c = event.tools_changed
                print(f"revision {event.revision}: tools_changed: server {c.server}:"
                      f" added {json.dumps([t.name for t in c.added])},"
                      f" updated {json.dumps([t.name for t in c.updated])},"
                      f" removed {json.dumps(list(c.removed))}")
            elif kind == "server_status":
                s = event.server_status
                print(f"revision {event.revision}: server_status: {s.name}"
                      f" {pb.ServerState.Name(s.state)} {s.message}")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:  # the deadline is our normal end
            raise
    print("## done")


if __name__ == "__main__":
    try:
        main()
    except grpc.RpcError as e:
        sys.exit(f"error: {e.code().name}: {e.details()}")
