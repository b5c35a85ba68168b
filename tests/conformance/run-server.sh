#!/usr/bin/env bash
# The official MCP conformance suite's server scenarios against the broker's MCP face, with the
# suite's reference server (reference/everything-server.ts) behind the broker as its only
# upstream (streamable HTTP, no prefix: the scenarios call the reference server's exact names).
#
# Installs what it needs as run-client.sh does (lib.sh), starts the reference server and a broker
# on 127.0.0.1 port 0 (each then names the port it got), runs every active server scenario (the suite's pending ones are
# skipped, as the suite itself does) against http://127.0.0.1:<face>/mcp, prints one line per
# scenario and the total of checks, keeps the results under tests/conformance/results/server/,
# and stops both. Needs a built broker (cargo build --bins). Exit 1 if a check fails, 2 if the
# suite, the reference server or the broker cannot be run.
#
#   bash tests/conformance/run-server.sh [SCENARIO...]    (default: every active server scenario)
#
# Environment: TOOLBROKER_BIN (default target/debug/toolbroker), CONFORMANCE_RESULTS (default
# tests/conformance/results; this script writes under its server/).
set -uo pipefail
[ -z "${TOOLBROKER_BIN:-}" ] || [[ "$TOOLBROKER_BIN" = /* ]] || TOOLBROKER_BIN=$PWD/$TOOLBROKER_BIN
cd "$(dirname "$0")/../.."

HERE=tests/conformance
VENV=.venv-node24
NODE_VERSION=24.19.0   # as pinned in $HERE/requirements.txt
RESULTS=${CONFORMANCE_RESULTS:-$HERE/results}/server
export TOOLBROKER_BIN=${TOOLBROKER_BIN:-target/debug/toolbroker}
# The suite 0.1.16's pending scenarios: its default run skips them.
PENDING=" json-schema-2020-12 server-sse-polling "

die() { echo "run-server.sh: $*" >&2; exit 2; }

# shellcheck source=tests/conformance/lib.sh
. "$HERE/lib.sh"

PIDS=()
stop_all() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  PIDS=()
}
trap stop_all EXIT
trap 'stop_all; exit 143' INT TERM HUP

# wait_for FILE PATTERN SECONDS WHAT [PID]: until FILE has a line matching PATTERN (while PID,
# if given, runs).
wait_for() {
  local file=$1 pattern=$2 seconds=$3 what=$4 pid=${5:-}
  for _ in $(seq $((seconds * 10))); do
    grep -q -- "$pattern" "$file" 2>/dev/null && return 0
    [ -z "$pid" ] || kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "--- $file" >&2; tail -n 20 "$file" >&2
  die "$what did not start within ${seconds}s"
}

main() {
  [ -x "$TOOLBROKER_BIN" ] || die "no broker at $TOOLBROKER_BIN: run cargo build --bins first"
  install
  rm -rf "$RESULTS"; mkdir -p "$RESULTS" || die "cannot create $RESULTS"

  # The reference server, unmodified but for where it listens: 127.0.0.1 only. It must sit
  # under $HERE for its imports to resolve from $HERE/node_modules.
  local server=$HERE/results/everything-server.mts preload ref_port face_addr
  sed 's/^app\.listen(PORT, () => {$/app.listen(Number(PORT), "127.0.0.1", () => {/' \
    "$HERE/reference/everything-server.ts" >"$server" || die "cannot write $server"
  grep -q '"127.0.0.1", () => {' "$server" || die "the listen patch did not apply"
  # PORT=0: the kernel picks the port. The server prints the one it was given, so the script
  # preloaded (tests/npm/report-port.cjs) prints the one it got.
  preload=$(realpath tests/npm/report-port.cjs)
  # From $HERE: `--import tsx` resolves from the working directory.
  (node=$(realpath "$NODE") && cd "$HERE" && PORT=0 exec "$node" --require "$preload" --import tsx results/everything-server.mts) \
    >"$RESULTS/reference.log" 2>&1 </dev/null &
  PIDS+=($!)
  wait_for "$RESULTS/reference.log" '^report-port: listening on port ' 60 "the reference server" "${PIDS[0]}"
  ref_port=$(sed -n 's/^report-port: listening on port //p' "$RESULTS/reference.log" | head -n 1)

  cat >"$RESULTS/broker.yaml" <<EOF
listen: 127.0.0.1:0
mcp_listen: 127.0.0.1:0
servers:
  - name: reference
    url: http://127.0.0.1:$ref_port/mcp
EOF
  "$TOOLBROKER_BIN" serve --config "$RESULTS/broker.yaml" --log-format json >"$RESULTS/broker.log" 2>&1 </dev/null &
  PIDS+=($!)
  wait_for "$RESULTS/broker.log" '"message":"listening"' 60 "the broker"
  wait_for "$RESULTS/broker.log" 'connected to mcp-conformance-test-server' 60 "the reference upstream"
  wait_for "$RESULTS/broker.log" '"message":"MCP face listening at /mcp"' 60 "the MCP face"
  face_addr=$(grep -m 1 '"message":"MCP face listening at /mcp"' "$RESULTS/broker.log" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["addr"])')
  [ -n "$face_addr" ] || die "the broker named no MCP face address"

  local scenarios=("$@") s
  if [ ${#scenarios[@]} -eq 0 ]; then
    mapfile -t scenarios < <("$NODE" "$SUITE_JS" list --server \
      | awk '/^Server scenarios/{f=1; next} /^$/{f=0} f && $1 == "-" {print $2}' \
      | while read -r s; do [[ "$PENDING" == *" $s "* ]] || echo "$s"; done)
    [ ${#scenarios[@]} -gt 0 ] || die "the suite listed no server scenarios"
  fi
  local url=http://$face_addr/mcp start=$SECONDS
  echo "${#scenarios[@]} server scenarios against the MCP face $url (reference server upstream); results in $RESULTS"
  local passed=0 failed=0 checks_ok=0 checks_bad=0 d ok bad warn counts
  printf '%-40s %-6s %s\n' scenario result "checks passed/total"
  for s in "${scenarios[@]}"; do
    d=$RESULTS/${s//\//_}; mkdir -p "$d"
    timeout -k 5 120 "$NODE" "$SUITE_JS" server --url "$url" --scenario "$s" -o "$d" \
      >"$d/output.txt" 2>&1 </dev/null
    counts=$(count_checks "$d")
    if [ "$counts" = "-" ]; then ok=0 bad=1 warn=0; else read -r ok bad warn <<<"$counts"; fi
    checks_ok=$((checks_ok + ok)); checks_bad=$((checks_bad + bad + warn))
    if [ "$bad" -eq 0 ] && [ "$warn" -eq 0 ] && [ "$ok" -gt 0 ]; then
      passed=$((passed + 1)); printf '%-40s %-6s %d/%d\n' "$s" PASS "$ok" "$ok"
    else
      failed=$((failed + 1)); printf '%-40s %-6s %d/%d  (see %s/output.txt)\n' "$s" FAIL "$ok" "$((ok + bad + warn))" "$d"
    fi
  done
  echo "server scenarios: $passed passed, $failed failed ($checks_ok checks passed, $checks_bad failed; $((SECONDS - start)) s)"
  [ "$failed" -eq 0 ]
}

main "$@"
