#!/usr/bin/env python3
"""A Python agent of toolbroker: list the tools, hand them to an LLM API, call one, watch changes.

Run it (from the repository root, with a broker running, e.g. `cargo run --release`):

    python3 -m venv examples/python-agent/.venv
    examples/python-agent/.venv/bin/pip install -r examples/python-agent/requirements.txt
    examples/python-agent/.venv/bin/python examples/python-agent/agent.py [ADDR] [--watch-seconds N] [--demo-change] [--burst N] [--answer TEXT] [--no-stream]

ADDR defaults to $TOOLBROKER_ADDR, else 127.0.0.1:50051. If $TOOLBROKER_TOKEN is set it is sent
as `authorization: Bearer <token>`. The gRPC stubs are generated from
proto/toolbroker/v1/broker.proto into examples/python-agent/gen/ on first run (grpcio-tools).
--demo-change calls the demo server's `add_tool` once Watch has started, so a ToolsChanged
event follows. --burst N makes N `echo` calls in a row: against a broker with a call rate
(`limits: {caller_rate: 2/s}`) some are refused with RESOURCE_EXHAUSTED, and call_tool() waits
the `retry-after` the broker asked for before trying again.
The `## stream` section calls the demo's `sleep` and `ask` over CallToolStream: it prints the
progress the server reports, and answers the question `ask` puts to the user with --answer
(default "blue"), as an agent would pass on its user's answer; --no-stream skips it (e.g. for a
burst whose audit log should hold only the burst). The `## resources` section lists the
resources, reads demo://readme and fills in the `summarize` prompt.
"""

import argparse
import json
import os
import queue
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


def call_tool_stream(stub, pb, request, metadata, on_progress, on_elicitation, timeout=60):
    """CallToolStream: runs the call `request` and returns its CallToolResponse, showing what
    happens meanwhile. Each progress event goes to `on_progress(progress)`; an elicitation (the
    MCP server asks the user for input) to `on_elicitation(elicitation)`, which returns the
    `(action, content)` to answer with; a sampling request (the server asks for a completion of
    the agent's model) is refused, as this agent has no model to hand it to. An unknown tool or
    a refused call raises grpc.RpcError, as CallTool does.

    gRPC Python sends a client stream from an iterator, read on a thread of its own: here a
    generator fed by a queue, so an answer can be sent when the event that asks for it has
    arrived. The generator's end half-closes the stream: the broker then declines any later
    elicitation, so it ends only once the result is in (or the call failed)."""
    outbox = queue.Queue()
    outbox.put(pb.CallToolStreamRequest(call=request))  # the call is the first message

    def requests():
        while (message := outbox.get()) is not None:
            yield message

    events = stub.CallToolStream(requests(), metadata=metadata, timeout=timeout)
    try:
        for event in events:
            kind = event.WhichOneof("event")
            if kind == "progress":
                on_progress(event.progress)
            elif kind == "elicitation":
                action, content = on_elicitation(event.elicitation)
                answer = pb.ElicitationResponse(id=event.elicitation.id, action=action)
                if content is not None:
                    answer.content.update(content)  # a google.protobuf.Struct, from a dict
                outbox.put(pb.CallToolStreamRequest(elicitation_response=answer))
            elif kind == "sampling":
                outbox.put(pb.CallToolStreamRequest(sampling_response=pb.SamplingResponse(
                    id=event.sampling.id, error="this agent has no model to sample from")))
            elif kind == "result":
                return event.result  # the last message: the broker ends the stream with OK
    finally:
        outbox.put(None)  # half-close, which also ends the sending thread
    raise RuntimeError("CallToolStream ended without a result")


def ask_user(elicitation, answer):
    """What an agent does with an elicitation: shows the server's question to its user and sends
    back what they fill in, or declines. The user here is --answer: it fills in the form's string
    fields (the demo's `ask` has one, `answer`); a form wanting anything else, or a URL to open
    (url mode), is declined, as this agent cannot show either."""
    print(f"question: {elicitation.message}")
    if elicitation.mode != "form":
        return "decline", None
    schema = json.loads(elicitation.requested_schema_json or "{}")
    fields = schema.get("properties", {})
    if any(field.get("type") != "string" for field in fields.values()):
        return "decline", None
    return "accept", {name: answer for name in fields}


def print_progress(progress):
    """One line per progress event: `progress 1/3: slept 200 of 600 ms`."""
    total = f"/{progress.total:g}" if progress.HasField("total") else ""
    print(f"progress {progress.progress:g}{total}: {progress.message}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("addr", nargs="?",
                        default=os.environ.get("TOOLBROKER_ADDR", "127.0.0.1:50051"))
    parser.add_argument("--watch-seconds", type=float, default=3.0)
    parser.add_argument("--demo-change", action="store_true")
    parser.add_argument("--burst", type=int, default=0, metavar="N")
    parser.add_argument("--answer", default="blue", metavar="TEXT")
    parser.add_argument("--no-stream", action="store_true")
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

    # 2c. Calls over CallToolStream: `sleep` reports its progress as it goes, and `ask` asks the
    #     user a question mid-call, which the agent answers on the same stream.
    if not args.no_stream:
        print("## stream")
        sleep = pb.CallToolRequest(name="sleep", arguments_json=json.dumps({"ms": 600, "steps": 3}))
        result = call_tool_stream(stub, pb, sleep, metadata, print_progress,
                                  on_elicitation=lambda elicitation: ("decline", None))
        print(f"sleep result{' (tool error)' if result.is_error else ''}: {result.text}")
        ask = pb.CallToolRequest(name="ask", arguments_json=json.dumps(
            {"question": "What colour should the logo be?"}))
        result = call_tool_stream(stub, pb, ask, metadata, print_progress,
                                  on_elicitation=lambda e: ask_user(e, args.answer))
        print(f"ask result{' (tool error)' if result.is_error else ''}: {result.text}")

    # 2d. Resources and prompts: what the servers offer besides tools, for the agent to put in
    #     the model's context.
    print("## resources")
    listed = stub.ListResources(pb.ListResourcesRequest(), metadata=metadata, timeout=10)
    for r in listed.resources:
        print(f"resource {r.server} {r.uri}")
    for t in listed.templates:
        print(f"template {t.server} {t.uri_template}")
    read = stub.ReadResource(pb.ReadResourceRequest(server="demo", uri="demo://readme"),
                             metadata=metadata, timeout=10)
    for c in read.contents:
        body = c.text if c.WhichOneof("contents") == "text" else f"({len(c.blob)} bytes)"
        print(f"read {c.uri}: {body}")
    prompt = stub.GetPrompt(pb.GetPromptRequest(name="summarize",
                                                arguments={"topic": "toolbroker"}),
                            metadata=metadata, timeout=10)
    for m in prompt.messages:
        kind = m.content.WhichOneof("kind")
        text = m.content.text.text if kind == "text" else f"<{kind} content>"
        print(f"prompt summarize ({m.role}): {text}")

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
