#!/usr/bin/env bash
# The official MCP conformance suite's client scenarios, with the broker as the MCP client.
#
# Installs (idempotently, all project-local) Node 24 from PyPI into .venv-node24 and the pinned
# suite into tests/conformance/node_modules (npm ci), lists the suite's client scenarios, runs
# each with adapter.py as the client command, prints one line per scenario and a total, and
# keeps the suite's JSON results under tests/conformance/results/. Needs a built broker
# (cargo build --bins). Exit 1 if a scenario fails that is not expected to (see EXPECTED_FAIL);
# 2 if the suite cannot be installed or run.
#
#   bash tests/conformance/run-client.sh [SCENARIO...]    (default: every client scenario)
#
# Environment: TOOLBROKER_BIN (default target/debug/toolbroker), CONFORMANCE_JOBS (scenarios at
# once, default 1: sse-retry checks a 450-700 ms reconnect window), CONFORMANCE_TIMEOUT_MS (per
# scenario, default the suite's 30000), CONFORMANCE_RESULTS (default tests/conformance/results).
set -uo pipefail
# A relative TOOLBROKER_BIN is meant from where the script was started.
[ -z "${TOOLBROKER_BIN:-}" ] || [[ "$TOOLBROKER_BIN" = /* ]] || TOOLBROKER_BIN=$PWD/$TOOLBROKER_BIN
cd "$(dirname "$0")/../.."

HERE=tests/conformance
VENV=.venv-node24
NODE_VERSION=24.19.0   # as pinned in $HERE/requirements.txt
RESULTS=${CONFORMANCE_RESULTS:-$HERE/results}
JOBS=${CONFORMANCE_JOBS:-1}
TIMEOUT_MS=${CONFORMANCE_TIMEOUT_MS:-30000}
export TOOLBROKER_BIN=${TOOLBROKER_BIN:-target/debug/toolbroker}
# The suite splits --command on spaces and runs it from this directory (the repository root).
ADAPTER="python3 $HERE/adapter.py"

# Scenarios that fail today and why; any other failure fails the run.
declare -A EXPECTED_FAIL=(
  [auth/2025-03-26-oauth-metadata-backcompat]="the suite 0.1.16's mock serves issuer <origin>/oauth from the root metadata URL, which RFC 8414 §3.3 says a client MUST reject (fixed upstream later: conformance PR #359)"
)

die() { echo "run-client.sh: $*" >&2; exit 2; }

# shellcheck source=tests/conformance/lib.sh
. "$HERE/lib.sh"

# run_one SCENARIO: the suite's verdict (its exit status) into $dir/verdict.
run_one() {
  local s=$1 d=$RESULTS/${1//\//_} rc
  mkdir -p "$d"
  # The suite kills the client at TIMEOUT_MS; this outer limit is for the suite itself.
  timeout -k 5 $((TIMEOUT_MS / 1000 + 30)) "$NODE" "$SUITE_JS" client --command "$ADAPTER" \
    --scenario "$s" --timeout "$TIMEOUT_MS" -o "$d" >"$d/output.txt" 2>&1 </dev/null
  rc=$?
  echo "$rc" >"$d/verdict"
}

main() {
  [ -x "$TOOLBROKER_BIN" ] || die "no broker at $TOOLBROKER_BIN: run cargo build --bins first"
  [[ "$PWD" != *" "* ]] || die "the repository path has a space; the suite splits its --command on spaces"
  install
  local scenarios=("$@") s
  if [ ${#scenarios[@]} -eq 0 ]; then
    mapfile -t scenarios < <("$NODE" "$SUITE_JS" list --client \
      | awk '/^Client scenarios/{f=1; next} /^$/{f=0} f && $1 == "-" {print $2}')
    [ ${#scenarios[@]} -gt 0 ] || die "the suite listed no client scenarios"
  fi
  local -A seen=(); local unique=()
  for s in "${scenarios[@]}"; do [ -n "${seen[$s]:-}" ] || unique+=("$s"); seen[$s]=1; done
  scenarios=("${unique[@]}")
  rm -rf "$RESULTS"; mkdir -p "$RESULTS" || die "cannot create $RESULTS"
  echo "${#scenarios[@]} client scenarios, $JOBS at a time; broker $TOOLBROKER_BIN; results in $RESULTS"

  local start=$SECONDS running=0
  for s in "${scenarios[@]}"; do
    if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
    run_one "$s" &
    running=$((running + 1))
  done
  wait

  local passed=0 failed=0 checks_ok=0 checks_all=0 unexpected=() fixed=() d rc counts ok bad warn verdict note
  printf '%-45s %-6s %s\n' scenario result "checks passed/total"
  for s in "${scenarios[@]}"; do
    d=$RESULTS/${s//\//_}
    rc=$(cat "$d/verdict" 2>/dev/null || echo "?")
    counts=$(count_checks "$d")
    if [ "$counts" = "-" ]; then ok=0 bad=0 warn=0; else read -r ok bad warn <<<"$counts"; fi
    checks_ok=$((checks_ok + ok)); checks_all=$((checks_all + ok + bad + warn))
    # The suite exits 0 only with no FAILURE or WARNING check, no timeout, and the client's
    # exit 0 (or an error exit where the scenario allows one); a run with no check passes nothing.
    note=""
    if [ "$rc" = 0 ] && [ "$ok" -gt 0 ]; then
      verdict=PASS; passed=$((passed + 1))
      [ -n "${EXPECTED_FAIL[$s]:-}" ] && { fixed+=("$s"); note="  (listed as expected to fail)"; }
    else
      verdict=FAIL; failed=$((failed + 1))
      [ "$counts" = "-" ] && note="  (no result: suite exit $rc; see $d/output.txt)"
      if [ -n "${EXPECTED_FAIL[$s]:-}" ]; then note="$note  (expected: ${EXPECTED_FAIL[$s]})"
      else unexpected+=("$s"); fi
    fi
    printf '%-45s %-6s %d/%d%s\n' "$s" "$verdict" "$ok" "$((ok + bad + warn))" "$note"
  done
  echo "client scenarios: $passed passed, $failed failed ($checks_ok checks passed of $checks_all)"
  echo "($((SECONDS - start)) s; checks counted: SUCCESS of SUCCESS + FAILURE + WARNING; per scenario: $RESULTS/<scenario>/output.txt, and checks.json, stdout.txt, stderr.txt (the adapter's log) under it)"
  [ ${#fixed[@]} -eq 0 ] || echo "now passing, remove from EXPECTED_FAIL in $0: ${fixed[*]}"
  if [ ${#unexpected[@]} -gt 0 ]; then
    echo "unexpected failures: ${unexpected[*]}" >&2
    return 1
  fi
}

main "$@"
