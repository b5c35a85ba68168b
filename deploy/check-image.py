#!/usr/bin/env python3
"""Checks the built toolbroker images without a container engine.

`podman run` does not work here, so each image's filesystem is mounted (through a created
container, which gives a writable root) and its ENTRYPOINT + CMD run under chroot as the image's
user with the image's environment and working directory:
  - the image config: non-root user, tini entrypoint, default command, OCI labels, ports;
  - `--version` and `check` of the default config /etc/toolbroker/config.yaml;
  - a real `serve` (the default config, ports moved to free loopback ports): gRPC health SERVING,
    the demo tools listed and called with grpcurl, Prometheus metrics; then SIGTERM to tini must
    end it with status 0 and leave no process behind;
  - runtime-node only: node, npx, python3, uv and uvx run, and the pinned server-everything
    (tests/npm) runs on the image's Node.js as a stdio server of the broker.
Prints each image's size. Usage: check-image.py --version V --revision R PODMAN-COMMAND...
(see build-image.sh, which passes the labels it built with).
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRPCURL = ROOT / ".venv" / "bin" / "grpcurl"
EVERYTHING = ROOT / "tests" / "npm" / "node_modules"
DEFAULT_CONFIG = "/etc/toolbroker/config.yaml"


class CheckFailed(Exception):
    """A property of an image that does not hold."""


def expect(condition, what):
    if not condition:
        raise CheckFailed(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Image:
    """One image, mounted through a container; commands run in it under chroot."""

    def __init__(self, podman, name):
        self.podman = podman
        self.name = name
        self.info = json.loads(self.run_podman("image", "inspect", name))[0]
        self.config = self.info["Config"]
        self.container = None
        self.rootfs = None
        self.mounts = []

    def run_podman(self, *args):
        return subprocess.run(
            [*self.podman, *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    def __enter__(self):
        self.container = self.run_podman("create", self.name)
        self.rootfs = Path(self.run_podman("mount", self.container))
        # /proc for the broker's process metrics and child handling, /dev for /dev/null.
        for kind, source, target in (("proc", "proc", "proc"), ("bind", "/dev", "dev")):
            where = self.rootfs / target
            args = ["-t", "proc", source] if kind == "proc" else ["--rbind", source]
            subprocess.run(["mount", *args, str(where)], check=True)
            self.mounts.append(where)
        return self

    def __exit__(self, *_):
        # After a failed check something may still run in the image (killing tini does not
        # reach its children): end it before unmounting.
        if self.rootfs:
            for pid in self.processes():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for where in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(where)], check=False)
        if self.container:
            subprocess.run([*self.podman, "umount", self.container], check=False,
                           capture_output=True)
            subprocess.run([*self.podman, "rm", "-f", self.container], check=False,
                           capture_output=True)

    def user(self):
        uid, _, gid = self.config["User"].partition(":")
        return int(uid), int(gid or uid)

    def popen(self, args, entrypoint=True, **kwargs):
        """Starts ENTRYPOINT + args (or args alone) as the image would: its user, env and
        working directory."""
        uid, gid = self.user()
        rootfs, workdir = str(self.rootfs), self.config.get("WorkingDir") or "/"

        def enter():
            os.chroot(rootfs)
            os.chdir(workdir)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)

        env = dict(item.split("=", 1) for item in self.config.get("Env", []))
        # tini is not PID 1 under chroot: as a subreaper it still adopts and reaps orphans.
        env["TINI_SUBREAPER"] = "1"
        argv = [*self.config["Entrypoint"], *args] if entrypoint else list(args)
        return subprocess.Popen(argv, env=env, preexec_fn=enter, text=True, **kwargs)

    def run(self, args, entrypoint=True, timeout=60):
        child = self.popen(args, entrypoint, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, _ = child.communicate(timeout=timeout)
        return child.returncode, out

    def processes(self):
        """PIDs of processes whose root is this image's filesystem."""
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.readlink(entry / "root") == str(self.rootfs):
                        pids.append(int(entry.name))
                except OSError:
                    pass
        return pids


def grpcurl(port, method, data=None, timeout=20):
    args = [str(GRPCURL), "-plaintext", "-max-time", str(timeout)]
    if data is not None:
        args += ["-d", json.dumps(data)]
    done = subprocess.run([*args, f"127.0.0.1:{port}", method], capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def wait_serving(broker, port, service, seconds=60):
    """Waits until the health of `service` is SERVING, while the broker runs."""
    deadline = time.monotonic() + seconds
    while True:
        code, out = grpcurl(port, "grpc.health.v1.Health/Check", {"service": service}, 2)
        if code == 0 and '"SERVING"' in out:
            return
        expect(broker.poll() is None, f"serve exited with {broker.returncode}")
        expect(time.monotonic() < deadline, f"{service!r} never SERVING: {out}")
        time.sleep(0.3)


def check_config(image, version, revision):
    config = image.config
    expect(config.get("User") == "10001:10001", f"user is {config.get('User')!r}, not 10001:10001")
    expect(config["Entrypoint"][:3] == ["tini", "--", "toolbroker"],
           f"entrypoint is {config['Entrypoint']}")
    expect(config["Cmd"] == ["serve", "--config", DEFAULT_CONFIG], f"cmd is {config['Cmd']}")
    labels = config.get("Labels") or {}
    expect(labels.get("org.opencontainers.image.version") == version,
           f"version label is {labels.get('org.opencontainers.image.version')!r}")
    expect(labels.get("org.opencontainers.image.revision") == revision,
           f"revision label is {labels.get('org.opencontainers.image.revision')!r}")
    expect("50051/tcp" in (config.get("ExposedPorts") or {}), "port 50051 is not exposed")
    expect((image.rootfs / "etc/ssl/certs/ca-certificates.crt").is_file(), "no CA certificates")


def check_commands(image, version):
    code, out = image.run(["--version"])
    expect(code == 0 and f"toolbroker {version}" in out, f"--version gave {code}: {out}")
    code, out = image.run(["check", "--config", DEFAULT_CONFIG])
    expect(code == 0, f"check of the default config gave {code}: {out}")


def smoke_config(image, with_node):
    """The default config with its ports moved to free loopback ports, written into the image."""
    grpc_port, metrics_port = free_port(), free_port()
    text = (image.rootfs / DEFAULT_CONFIG.lstrip("/")).read_text()
    text, n = re.subn(r'(?m)^listen: .*$', f'listen: "127.0.0.1:{grpc_port}"', text)
    text, m = re.subn(r'(?m)^metrics_listen: .*$', f'metrics_listen: "127.0.0.1:{metrics_port}"',
                      text)
    expect(n == 1 and m == 1, "the default config has no top-level listen/metrics_listen")
    if with_node:
        shutil.copytree(EVERYTHING, image.rootfs / "tmp/npm/node_modules", symlinks=True)
        text += (
            "  - name: everything\n"
            "    command: node\n"
            "    args: [/tmp/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js,"
            " stdio]\n"
            "    prefix: ev_\n"
            "    init_timeout: 60s\n"
        )
    (image.rootfs / "tmp/smoke.yaml").write_text(text)
    return grpc_port, metrics_port


def check_serve(image, with_node):
    grpc_port, metrics_port = smoke_config(image, with_node)
    log_path = image.rootfs / "tmp/smoke.log"
    with open(log_path, "w") as log:
        broker = image.popen(["serve", "--config", "/tmp/smoke.yaml"], stdout=log, stderr=log)
    try:
        wait_serving(broker, grpc_port, "toolbroker.v1.ToolBroker")
        code, out = grpcurl(grpc_port, "toolbroker.v1.ToolBroker/ListTools")
        expect(code == 0 and '"name": "echo"' in out, f"ListTools: {out[:500]}")
        code, out = grpcurl(grpc_port, "toolbroker.v1.ToolBroker/CallTool",
                            {"name": "add", "arguments": {"a": 2, "b": 40}})
        expect(code == 0 and '"text": "42"' in out, f"CallTool add: {out[:500]}")
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        expect("toolbroker_" in metrics, "no toolbroker_ series in /metrics")
        if with_node:
            wait_serving(broker, grpc_port, "toolbroker.server.everything")
            code, out = grpcurl(grpc_port, "toolbroker.v1.ToolBroker/CallTool",
                                {"name": "ev_echo", "arguments": {"message": "from node"}})
            expect(code == 0 and "from node" in out, f"CallTool ev_echo: {out[:500]}")
        broker.send_signal(signal.SIGTERM)
        code = broker.wait(timeout=30)
        expect(code == 0, f"serve ended with {code} after SIGTERM")
        deadline = time.monotonic() + 5
        while image.processes() and time.monotonic() < deadline:
            time.sleep(0.1)
        expect(not image.processes(), f"processes left behind: {image.processes()}")
    except BaseException:
        print(log_path.read_text()[-4000:], file=sys.stderr)
        raise
    finally:
        if broker.poll() is None:
            broker.kill()
            broker.wait()


def check_node(image):
    for tool in ("node", "npx", "python3", "uv", "uvx"):
        code, out = image.run([tool, "--version"], entrypoint=False)
        expect(code == 0, f"{tool} --version: {out}")
        print(f"  {tool} {out.strip()}")


def main():
    parser = argparse.ArgumentParser(description="Checks the built toolbroker images.")
    parser.add_argument("--version", required=True, help="expected version label")
    parser.add_argument("--revision", required=True, help="expected revision label")
    parser.add_argument("podman", nargs=argparse.REMAINDER, help="the podman command to use")
    args = parser.parse_args()
    podman, version, revision = args.podman, args.version, args.revision
    expect(podman, "no podman command given")
    for target in ("runtime", "runtime-node"):
        with Image(podman, f"localhost/toolbroker:{target}") as image:
            with_node = target == "runtime-node"
            check_config(image, version, revision)
            check_commands(image, version)
            if with_node:
                check_node(image)
            check_serve(image, with_node)
            size = image.info["Size"] / 1e6
            print(f"{target}: {size:.1f} MB — config, --version, check, serve: ok")
    for base in ("docker.io/library/debian:bookworm-slim", "docker.io/library/rust:1-bookworm"):
        info = json.loads(subprocess.run([*podman, "image", "inspect", base], check=True,
                                         capture_output=True, text=True).stdout)[0]
        print(f"base {base}: {info['Size'] / 1e6:.1f} MB (made here with debootstrap)")


if __name__ == "__main__":
    try:
        main()
    except CheckFailed as failure:
        print(f"image check failed: {failure}", file=sys.stderr)
        sys.exit(1)
