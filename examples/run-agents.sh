#!/usr/bin/env bash
# Runs the Python and Node.js agents against a real broker (the built-in demo server), over TCP
# and over a Unix socket, and checks what they print; then the Python agent's burst of calls against a second broker with a call
# rate and an audit log, checking that it waited the retry-after it was given, finished every
# call, and that the audit log holds one line per call. Needs `cargo build --bins` first,
# python3 (3.10+) and Node.js 20+ with npm. Installs the pinned dependencies into
# examples/python-agent/.venv and examples/node-agent/node_modules. Used by CI:
# `bash examples/run-agents.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=target/debug/toolbroker
WATCH_SECONDS=${WATCH_SECONDS:-3}
[[ -x $BIN ]] || { echo "run-agents: $BIN is missing; run 'cargo build --bins' first" >&2; exit 1; }

echo "--- agent dependencies"
python3 -m venv examples/python-agent/.venv
examples/python-agent/.venv/bin/pip install -q --disable-pip-version-check \
    -r examples/python-agent/requirements.txt
npm ci --no-audit --no-fund --silent --prefix examples/node-agent

work=$(mktemp -d)
broker_pids=()
cleanup() {
    for pid in "${broker_pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# Starts a broker on a free port (`serve` with the arguments after NAME; its log in
# $work/NAME.log) and waits until it listens and its demo server is connected. Sets $addr and
# $broker_pid.
start_broker() { # name [serve arguments...]
    local name=$1 log=$work/$1.log
    shift
    "$BIN" serve --listen 127.0.0.1:0 --log-format json "$@" 2>"$log" &
    broker_pid=$!
    broker_pids+=("$broker_pid")
    addr=
    for _ in $(seq 300); do
        if [[ -z $addr ]]; then
            addr=$(grep '"message":"listening"' "$log" | head -n 1 |
                sed -E 's/.*"addr":"([^"]+)".*/\1/') || true
        fi
        [[ -n $addr ]] && grep -q '"message":"connected to .*"server":"demo"' "$log" && break
        kill -0 "$broker_pid" 2>/dev/null || { cat "$log" >&2; echo "run-agents: the $name broker exited" >&2; exit 1; }
        sleep 0.1
    done
    [[ -n $addr ]] || { cat "$log" >&2; echo "run-agents: no 'listening' line in the $name broker's log" >&2; exit 1; }
    grep -q '"message":"connected to .*"server":"demo"' "$log" ||
        { cat "$log" >&2; echo "run-agents: the $name broker's demo server did not connect" >&2; exit 1; }
    echo "$name broker on $addr"
}

echo "--- broker"
start_broker demo

# Checks one agent's output: the echo text, both tool lists with `echo` and its schema; the
# CallToolStream calls (sleep's progress and result, ask's question and the --answer it was
# given); the resources, the readme's text and the prompt; the Watch snapshot, and the
# ToolsChanged event that --demo-change caused.
check() { # name output expected-echo-text added-tool answer
    python3 - "$@" <<'EOF'
import json, re, sys
name, path, echo_text, added, answer = sys.argv[1:]
out = open(path).read()
sections = dict(re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", out, re.S | re.M))
def fail(why):
    sys.exit(f"run-agents: {name} agent: {why}; its output is above")
try:
    openai = {t["function"]["name"]: t for t in json.loads(sections["OpenAI tools"])}
    anthropic = {t["name"]: t for t in json.loads(sections["Anthropic tools"])}
except (KeyError, ValueError) as e:
    fail(f"no parsable OpenAI/Anthropic tool JSON ({e!r})")
o, a = openai.get("echo"), anthropic.get("echo")
if not o or o["type"] != "function" or o["function"]["parameters"].get("type") != "object" \
        or "message" not in o["function"]["parameters"].get("properties", {}):
    fail("the OpenAI JSON lacks tool echo with its schema")
if not a or a["input_schema"] != o["function"]["parameters"] or not a["description"]:
    fail("the Anthropic JSON lacks tool echo with its schema")
if sections.get("echo result", "").strip() != echo_text:
    fail(f"echo did not print {echo_text!r}")
# sleep {"ms": 600, "steps": 3}: progress lines (each step's, in order; at least one), its
# result; then ask's question and the answer the agent gave for its user.
stream = sections.get("stream", "").splitlines()
progress = [l for l in stream if l.startswith("progress ")]
if not progress:
    fail("the stream section printed no progress")
steps = []
for line in progress:
    m = re.fullmatch(r"progress ([123])/3: slept (\d+) of 600 ms", line)
    if not m or int(m.group(2)) != 200 * int(m.group(1)):
        fail(f"unexpected progress line {line!r}")
    steps.append(int(m.group(1)))
if steps != sorted(set(steps)):
    fail(f"the progress went back or repeated: {progress}")
want = progress + ["sleep result: slept 600 ms", "question: What colour should the logo be?",
                   f"ask result: the user answered: {answer}"]
if stream != want:
    fail(f"the stream section is {stream}, expected {want}")
# The demo's two resources and template, the readme's text, the prompt filled in.
want = ["resource demo demo://readme", "resource demo demo://logo.png",
        "template demo demo://echo/{text}",
        "read demo://readme: The toolbroker demo server: tools that exercise MCP, two resources,"
        " a resource template and a prompt.",
        "prompt summarize (user): Summarize toolbroker."]
if sections.get("resources", "").splitlines() != want:
    fail(f"the resources section is not {want}")
watch = sections.get("Watch", "")
if not re.search(r"^revision \d+: snapshot: \d+ tools; servers: demo=SERVER_STATE_READY", watch, re.M):
    fail("Watch printed no snapshot")
if not re.search(rf"^revision \d+: tools_changed: server demo: added \[.{added}.\]", watch, re.M):
    fail(f"Watch printed no ToolsChanged event adding {added}")
if "done" not in sections:
    fail("it did not finish")
print(f"{name} agent: ok")
EOF
}

# Runs both agents against ADDR and checks their output; LABEL names the run and its files.
run_agents() { # addr label
    local at=$1 label=$2
    echo "--- python agent$label"
    examples/python-agent/.venv/bin/python examples/python-agent/agent.py "$at" \
        --watch-seconds "$WATCH_SECONDS" --demo-change --answer "blue, said python" |
        tee "$work/python$label.out" || { echo "run-agents: the python agent failed$label" >&2; exit 1; }
    check python "$work/python$label.out" "hello from python" added_by_python "blue, said python"

    echo "--- node agent$label"
    TOOLBROKER_ADDR=$at node examples/node-agent/agent.js \
        --watch-seconds "$WATCH_SECONDS" --demo-change --answer "green, said node" |
        tee "$work/node$label.out" || { echo "run-agents: the node agent failed$label" >&2; exit 1; }
    check node "$work/node$label.out" "hello from node" added_by_node "green, said node"
}
run_agents "$addr" ""

# Both agents again, over a broker's Unix socket (`unix_listen`): grpcio sends the socket's path
# as the HTTP/2 authority, which the broker mends; grpc-js sends `localhost`.
cat >"$work/socket.yaml" <<EOF
unix_listen: "$work/grpc.sock"
servers:
  - name: demo
    command: "$PWD/$BIN"
    args: [demo-server]
EOF
echo "--- broker with a Unix socket"
start_broker socket --config "$work/socket.yaml"
run_agents "unix://$work/grpc.sock" " over the socket"

# The same demo server, with a call rate the burst goes over and an audit log.
BURST=6
cat >"$work/rates.yaml" <<EOF
limits: { caller_rate: 2/s }                  # a burst of 2, then one call every 500 ms
audit: { file: "$work/audit.jsonl" }
servers:
  - name: demo
    command: "$PWD/$BIN"
    args: [demo-server]
EOF
echo "--- broker with a call rate"
start_broker rate-limited --config "$work/rates.yaml"

echo "--- python agent: a burst of $BURST calls over limits.caller_rate 2/s"
# --no-stream: its CallToolStream calls would count against the rate and in the audit log.
examples/python-agent/.venv/bin/python examples/python-agent/agent.py "$addr" \
    --watch-seconds 0.5 --burst "$BURST" --no-stream | tee "$work/burst.out" ||
    { echo "run-agents: the python agent's burst failed" >&2; exit 1; }
# SIGTERM: the broker writes what is queued for the audit log before it exits.
kill -TERM "$broker_pid"
wait "$broker_pid" || { cat "$work/rate-limited.log" >&2; echo "run-agents: the rate-limited broker did not exit 0" >&2; exit 1; }
echo "audit log:"
cat "$work/audit.jsonl"

# Checks the burst: every call done, in order, after at least one wait of retry-after seconds
# for limits.caller_rate; and one audit line per call, refused ones included.
python3 - "$work/burst.out" "$work/audit.jsonl" "$BURST" <<'EOF'
import json, os, re, stat, sys
out_path, audit_path, burst = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = open(out_path).read()
def fail(why):
    sys.exit(f"run-agents: python agent's burst: {why}; its output is above")
m = re.search(rf"^## burst of {burst} calls\n(.*?)(?=^## |\Z)", out, re.S | re.M)
if not m:
    fail("no burst section")
lines = m.group(1).splitlines()
waits = [l for l in lines if l.startswith("waited ")]
results = [l for l in lines if not l.startswith("waited ")]
if results != [f"burst call {i}" for i in range(1, burst + 1)]:
    fail(f"not every call was done, in order: {results}")
if not waits:
    fail("no call waited: the burst did not go over the rate")
for w in waits:
    if not re.fullmatch(r"waited (\d+) s \(retry-after\): this caller's call rate "
                        r"\(limits\.caller_rate: 2/s\) is used up; retry in \1 s", w):
        fail(f"unexpected wait line {w!r}")
if not re.search(r"^## done$", out, re.M):
    fail("it did not finish")

audit = [json.loads(l) for l in open(audit_path)]
def audit_fail(why):
    sys.exit(f"run-agents: the audit log: {why}; it is above")
codes = [a["code"] for a in audit]
if codes.count("OK") != burst + 1 or codes.count("RESOURCE_EXHAUSTED") != len(waits) \
        or len(codes) != burst + 1 + len(waits):
    audit_fail(f"expected {burst + 1} OK and {len(waits)} RESOURCE_EXHAUSTED lines, found {codes}")
for a in audit:
    if (a["caller"], a["tool"], a["server"], a["is_error"]) != ("anonymous", "echo", "demo", False) \
            or "arguments" in a or not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", a["ts"]) \
            or not isinstance(a["duration_ms"], (int, float)) or "trace_id" not in a:
        audit_fail(f"unexpected line {a}")
if stat.S_IMODE(os.stat(audit_path).st_mode) != 0o600:
    audit_fail("its mode is not 0600")
print(f"python agent's burst: ok ({len(waits)} waits); audit log: ok ({len(audit)} lines)")
EOF

echo "--- agents: ok"
