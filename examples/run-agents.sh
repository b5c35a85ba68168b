#!/usr/bin/env bash
# Runs the Python and Node.js agents against a real broker (the built-in demo server) and checks
# what they print. Needs `cargo build --bins` first, python3 (3.10+) and Node.js 20+ with npm.
# Installs the pinned dependencies into examples/python-agent/.venv and
# examples/node-agent/node_modules. Used by CI: `bash examples/run-agents.sh`.
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
broker_pid=
cleanup() {
    if [[ -n $broker_pid ]]; then
        kill "$broker_pid" 2>/dev/null || true
        wait "$broker_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

echo "--- broker"
"$BIN" serve --listen 127.0.0.1:0 --log-format json 2>"$work/broker.log" &
broker_pid=$!
addr=
for _ in $(seq 100); do
    addr=$(grep '"message":"listening"' "$work/broker.log" | head -n 1 |
        sed -E 's/.*"addr":"([^"]+)".*/\1/') || true
    [[ -n $addr ]] && break
    kill -0 "$broker_pid" 2>/dev/null || { cat "$work/broker.log" >&2; echo "run-agents: the broker exited" >&2; exit 1; }
    sleep 0.1
done
[[ -n $addr ]] || { cat "$work/broker.log" >&2; echo "run-agents: no 'listening' line in the broker's log" >&2; exit 1; }
echo "broker on $addr"

# Checks one agent's output: the echo text, both tool lists with `echo` and its schema, the Watch
# snapshot, and the ToolsChanged event that --demo-change caused.
check() { # name output expected-echo-text added-tool
    python3 - "$@" <<'EOF'
import json, re, sys
name, path, echo_text, added = sys.argv[1:]
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

echo "--- python agent"
examples/python-agent/.venv/bin/python examples/python-agent/agent.py "$addr" \
    --watch-seconds "$WATCH_SECONDS" --demo-change | tee "$work/python.out" ||
    { echo "run-agents: the python agent failed" >&2; exit 1; }
check python "$work/python.out" "hello from python" added_by_python

echo "--- node agent"
TOOLBROKER_ADDR=$addr node examples/node-agent/agent.js \
    --watch-seconds "$WATCH_SECONDS" --demo-change | tee "$work/node.out" ||
    { echo "run-agents: the node agent failed" >&2; exit 1; }
check node "$work/node.out" "hello from node" added_by_node

echo "--- agents: ok"
