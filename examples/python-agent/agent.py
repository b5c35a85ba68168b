#!/usr/bin/env python3
"""A Python agent of toolbroker: list the tools, hand them to an LLM API, call one, watch changes.

Run it (from the repository root, with a broker running, e.g. `cargo run --release`):

    python3 -m venv examples/python-agent/.venv
    examples/python-agent/.venv/bin/pip install -r examples/python-agent/requirements.txt
    examples/python-agent/.venv/bin/python examples/python-agent/agent.py [ADDR] [--watch-seconds N] [--demo-change] [--burst N]

ADDR defaults to $TOOLBROKER_ADDR, else 127.0.0.1:50051. If $TOOLBROKER_TOKEN is set it is sent
as `authorization: Bearer <token>`. The gRPC stubs are generated from
proto/toolbroker/v1/broker.proto into examples/python-agent/gen/ on first run (grpcio-tools).
--demo-change calls the demo server's `add_tool` once Watch has started, so a ToolsChanged
event follows. --burst N makes N `echo` calls in a row: against a broker with a call rate
(`limits: {caller_rate: 2/s}`) some are refused with RESOURCE_EXHAUSTED, and call_tool() waits
the `retry-after` the broker asked for before trying again.
"""

import argparse
import json
import os
import sys
import time
from importlib import resources
from pathlib import Path

import grpc
from google.rpc import error_details_pb2, status_pb2

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


def retry_after(error):
    """The seconds to wait before calling again, when `error` is the broker's refusal for a call
    rate; else None (the other RESOURCE_EXHAUSTED refusals, e.g. a message too large or a full
    call queue, say no retry-after).

    The broker says it twice: in a `retry-after` trailer (whole seconds, read first) and in a
    google.rpc.RetryInfo among the status details (the `grpc-status-details-bin` trailer)."""
    if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    trailers = dict(error.trailing_metadata() or ())
    if "retry-after" in trailers:
        return float(trailers["retry-after"])
    if "grpc-status-details-bin" in trailers:
        status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
        for detail in status.details:
            info = error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                return info.retry_delay.ToTimedelta().total_seconds()
    return None


def call_tool(stub, request, metadata, attempts=5, max_wait=60.0, timeout=30):
    """CallTool, honouring call rates: when the broker refuses the call because a rate is used
    up, waits as long as it says and tries again, `attempts` times in all. Any other error, the
    last refusal, or one asking for a wait over `max_wait` seconds (a rate per hour may say
    minutes) is raised, for the agent to decide."""
    for attempt in range(1, attempts + 1):
        try:
            return stub.CallTool(request, metadata=metadata, timeout=timeout)
        except grpc.RpcError as error:
            wait = retry_after(error)
            if wait is None or wait > max_wait or attempt == attempts:
                raise
            time.sleep(wait)
            print(f"waited {wait:g} s (retry-after): {error.details()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("addr", nargs="?",
                        default=os.environ.get("TOOLBROKER_ADDR", "127.0.0.1:50051"))
    parser.add_argument("--watch-seconds", type=float, default=3.0)
    parser.add_argument("--demo-change", action="store_true")
    parser.add_argument("--burst", type=int, default=0, metavar="N")
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
    result = call_tool(stub, pb.CallToolRequest(name="echo", arguments_json=json.dumps(
        {"message": "hello from python"})), metadata)
    print(f"## echo result{' (tool error)' if result.is_error else ''}")
    print(result.text)

    # 2b. A burst of calls (--burst N), as a busy agent makes: over a call rate, call_tool waits
    #     the retry-after the broker asks for, and every call gets done.
    if args.burst:
        print(f"## burst of {args.burst} calls")
        for i in range(1, args.burst + 1):
            result = call_tool(stub, pb.CallToolRequest(name="echo", arguments_json=json.dumps(
                {"message": f"burst call {i}"})), metadata)
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
                    call_tool(stub, pb.CallToolRequest(name="add_tool", arguments_json=json.dumps(
                        {"name": "added_by_python"})), metadata)
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
