#!/usr/bin/env python3
"""The client the MCP conformance suite runs: `adapter.py <server-url>`.

The suite (npm @modelcontextprotocol/conformance, client mode) starts a scenario server and runs
this script with its URL, the scenario's name in MCP_CONFORMANCE_SCENARIO and, for four auth
scenarios, MCP_CONFORMANCE_CONTEXT (JSON: client_id, client_secret, private_key_pem, idp_*...).
The MCP client under test is the broker: this script writes a broker config with that URL as
its one upstream server `conf`, runs `toolbroker login` first when the scenario needs an
authorization code, starts `toolbroker serve`, makes the scenario's call with `toolbroker call`,
stops the broker and exits 0 if every step worked, non-zero otherwise. See run-client.sh.

Python 3.10+ standard library only. Everything it does is logged to stderr (the suite keeps it
in stderr.txt); tokens and secrets never are. Environment:
  TOOLBROKER_BIN          the broker binary (default target/debug/toolbroker of this repository)
  CONFORMANCE_DEADLINE_S  seconds the whole run may take (default 25; the suite kills at 30)
  CONFORMANCE_KEEP_TMP    1: keep the temporary directory (config, logs, token file) and say where
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVER = "conf"  # the upstream's name in the broker config; no prefix, so exposed = original name
# A client ID metadata document URL (SEP-991) as the suite's reference client uses; the suite
# only checks that it is the client_id sent to /authorize.
CIMD_URL = "https://conformance-test.local/client-metadata.json"
MAX_RELOGINS = 2  # step-up: 3 authorizations in all, the suite's retry limit

# The call each non-auth scenario makes: (original tool name, arguments).
CORE_CALLS: dict[str, tuple[str, dict] | None] = {
    "initialize": None,
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    # Made over CallToolStream, accepting the question with its schema's defaults.
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}
CLIENT_CREDENTIALS = ("auth/client-credentials-basic", "auth/client-credentials-jwt")
CROSS_APP = "auth/cross-app-access-complete-flow"

START = time.monotonic()
DEADLINE = START + float(os.environ.get("CONFORMANCE_DEADLINE_S", "25"))


class Failed(Exception):
    """A step failed: the message says which and why; the adapter exits 1."""


class Terminated(Exception):
    """SIGTERM/SIGINT/SIGHUP (the suite's timeout): clean up and exit."""


def log(message: str) -> None:
    print(f"adapter [{time.monotonic() - START:5.2f}s] {message}", file=sys.stderr, flush=True)


def remaining(cap: float | None = None) -> float:
    left = DEADLINE - time.monotonic()
    if left <= 0:
        raise Failed("out of time (the adapter's deadline passed)")
    return left if cap is None else min(left, cap)


def exposed_name(original: str) -> str:
    """The broker's exposed name with no prefix: characters outside [A-Za-z0-9_-] become _."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", original)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the adapter dies (Linux), so no broker or login
    outlives a killed adapter."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux: the adapter's own cleanup has to do
        pass


class Adapter:
    def __init__(self, url: str, scenario: str, context: dict) -> None:
        self.url = url
        self.scenario = scenario
        self.context = context
        self.tmp = Path(tempfile.mkdtemp(prefix="tb-conformance-"))
        self.config_path = self.tmp / "broker.json"
        self.token_store = self.tmp / "token.json"
        binary = Path(os.environ.get("TOOLBROKER_BIN") or "target/debug/toolbroker")
        self.bin = str(binary if binary.is_absolute() else REPO / binary)
        self.env = self._child_env()
        self.broker: subprocess.Popen | None = None
        self.broker_log: Path | None = None
        self.broker_log_offset = 0
        self.entries: list[dict] = []  # the broker's log so far
        self.seen = 0
        self.addr = ""
        self.children: list[subprocess.Popen] = []
        self.logins = 0

    # ---- environment and config -------------------------------------------------------------

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        # The scenario servers are on loopback: no proxy, and nothing of an outer broker setup.
        for key in list(env):
            if key.lower() in ("http_proxy", "https_proxy", "all_proxy") or key in (
                "TOOLBROKER_CONFIG",
                "TOOLBROKER_LISTEN",
                "TOOLBROKER_ADDR",
                "TOOLBROKER_TOKEN",
            ):
                del env[key]
        env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
        env["TOOLBROKER_LOG_FORMAT"] = "json"
        return env

    def config(self) -> dict:
        server: dict = {
            "name": SERVER,
            "url": self.url,
            # Every scenario server speaks streamable HTTP; naming it skips transport detection.
            "transport": "streamable-http",
            "timeout": "15s",
            "init_timeout": "10s",
            "backoff_initial": "500ms",
            "backoff_max": "2s",
        }
        top: dict = {"shutdown_grace": "1s", "servers": [server]}
        ctx = self.context
        if self.scenario in CLIENT_CREDENTIALS:
            oauth: dict = {"client_id": ctx.get("client_id", "")}
            if ctx.get("private_key_pem"):
                key = self.tmp / "client-key.pem"
                key.touch(mode=0o600)
                key.write_text(ctx["private_key_pem"])
                oauth["private_key_file"] = str(key)
                if ctx.get("signing_algorithm"):
                    oauth["signing_algorithm"] = ctx["signing_algorithm"]
            else:
                self.env["CONF_CLIENT_SECRET"] = ctx.get("client_secret", "")
                oauth["client_secret_env"] = "CONF_CLIENT_SECRET"
            server["oauth"] = oauth
        elif self.scenario == CROSS_APP:
            self.env["CONF_CLIENT_SECRET"] = ctx.get("client_secret", "")
            self.env["CONF_USER_TOKEN"] = ctx.get("idp_id_token", "")
            server["isolation"] = "per-caller"
            # Expanded by the broker from its environment: the token is not written to the file.
            server["discovery"] = {"token": "${CONF_USER_TOKEN}"}
            server["oauth"] = {
                "client_id": ctx.get("client_id", ""),
                "client_secret_env": "CONF_CLIENT_SECRET",
                "cross_app_access": {
                    "idp_token_endpoint": ctx.get("idp_token_endpoint", ""),
                    "idp_client_id": ctx.get("idp_client_id", ""),
                    "idp_issuer": ctx.get("idp_issuer", ""),
                },
            }
            top["auth"] = {"tokens": [{"name": "user", "value_env": "CONF_USER_TOKEN"}]}
        elif self.scenario.startswith("auth/"):
            oauth = {"token_store": str(self.token_store), "client_metadata_url": CIMD_URL}
            if ctx.get("client_id"):
                oauth["client_id"] = ctx["client_id"]
            if ctx.get("client_secret"):
                self.env["CONF_CLIENT_SECRET"] = ctx["client_secret"]
                oauth["client_secret_env"] = "CONF_CLIENT_SECRET"
            server["oauth"] = oauth
        return top

    def write_config(self) -> None:
        top = self.config()
        self.config_path.write_text(json.dumps(top, indent=2) + "\n")
        oauth = top["servers"][0].get("oauth")
        log(f"config {self.config_path}: server {SERVER!r} at {self.url}"
            + (f", oauth keys {sorted(oauth)}" if oauth else ", no oauth"))

    # ---- processes --------------------------------------------------------------------------

    def spawn(self, args: list[str], **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(
            [self.bin, *args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
            **kwargs,
        )
        self.children.append(proc)
        return proc

    def run_cli(self, args: list[str], timeout: float) -> subprocess.CompletedProcess:
        """A short-lived `toolbroker` command (tools, call); its output is captured."""
        env = self.env
        if self.scenario == CROSS_APP:
            env = dict(env, TOOLBROKER_TOKEN=self.context.get("idp_id_token", ""))
        try:
            return subprocess.run(
                [self.bin, *args],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=remaining(timeout),
                preexec_fn=_die_with_parent,
            )
        except subprocess.TimeoutExpired as e:
            raise Failed(f"`toolbroker {args[0]}` did not finish within {e.timeout:.1f}s") from None

    @staticmethod
    def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, wait: float = 5.0) -> int | None:
        if proc.poll() is None:
            try:
                proc.send_signal(sig)
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def cleanup(self) -> None:
        if self.broker is not None and self.broker.poll() is None:
            rc = self.stop(self.broker, wait=4.0)
            log(f"broker stopped (exit {rc})")
        for proc in self.children:
            if proc.poll() is None:
                self.stop(proc, wait=2.0)
        self.relay_broker_log(final=True)
        if os.environ.get("CONFORMANCE_KEEP_TMP") == "1":
            log(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- the broker's log -------------------------------------------------------------------

    def new_log_entries(self) -> list[dict]:
        """Reads (into self.entries, and echoes) the broker's JSON log lines written since the
        last look (a line that is not JSON as a message); returns them."""
        if self.broker_log is None or not self.broker_log.exists():
            return []
        with self.broker_log.open("rb") as f:
            f.seek(self.broker_log_offset)
            data = f.read()
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.broker_log_offset += end + 1
        entries = []
        for line in data[: end + 1].decode("utf-8", "replace").splitlines():
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict):
                    entry = {"message": line}
            except ValueError:
                entry = {"message": line}
            entries.append(entry)
            self.echo(entry)
        self.entries.extend(entries)
        return entries

    @staticmethod
    def echo(entry: dict) -> None:
        level = entry.get("level", "")
        message = entry.get("message", "")
        fields = {k: v for k, v in entry.items()
                  if k not in ("timestamp", "level", "message", "target", "span", "spans")}
        extra = " ".join(f"{k}={v}" for k, v in fields.items())
        print(f"broker| {level} {message} {extra}".rstrip(), file=sys.stderr, flush=True)

    def relay_broker_log(self, final: bool = False) -> None:
        self.new_log_entries()
        if final and self.broker_log is not None and self.broker_log.exists():
            with self.broker_log.open("rb") as f:  # a last line without its newline
                f.seek(self.broker_log_offset)
                rest = f.read().decode("utf-8", "replace").strip()
            if rest:
                print(f"broker| {rest}", file=sys.stderr, flush=True)
            self.broker_log = None

    # ---- steps ------------------------------------------------------------------------------

    def login(self) -> None:
        """`toolbroker login`: its first stdout line is the authorization URL; following it (as a
        browser would: the suite's /authorize answers 302 to login's loopback redirect URI)
        delivers the code; login then writes the token file and exits 0."""
        if self.logins > MAX_RELOGINS:
            raise Failed(f"no more authorizations: {self.logins} done already")
        self.logins += 1
        log(f"login #{self.logins}: toolbroker login {SERVER} --config ... --no-browser")
        err_path = self.tmp / f"login-{self.logins}.stderr"
        with err_path.open("wb") as err:
            proc = self.spawn(["login", SERVER, "--config", str(self.config_path), "--no-browser"],
                              stdout=subprocess.PIPE, stderr=err)
        try:
            line = self._first_line(proc, remaining(12.0))
            if line is None:
                rc = self._wait(proc, 3.0)
                raise Failed(f"login printed no authorization URL (exit {rc})")
            if not re.match(r"https?://", line):
                raise Failed(f"login's first line is not a URL: {line[:80]!r}")
            parts = urllib.parse.urlsplit(line)
            log(f"authorization URL {parts.scheme}://{parts.netloc}{parts.path}; following it")
            self._follow(line)
            rc = self._wait(proc, remaining(10.0))
            if rc != 0:
                raise Failed(f"login exited {rc} after the redirect")
            log(f"login #{self.logins} done")
        finally:
            if proc.poll() is None:
                self.stop(proc, wait=2.0)
            if proc.stdout:
                proc.stdout.close()
            for text in err_path.read_text(errors="replace").splitlines():
                print(f"login| {text}", file=sys.stderr, flush=True)

    @staticmethod
    def _first_line(proc: subprocess.Popen, timeout: float) -> str | None:
        """The first stdout line, or None if stdout closed first."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        end = time.monotonic() + timeout
        while b"\n" not in buf:
            left = end - time.monotonic()
            if left <= 0:
                raise Failed(f"login printed no line within {timeout:.1f}s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                return buf.decode(errors="replace").strip() or None
            buf += chunk
        return buf.split(b"\n", 1)[0].decode(errors="replace").strip() or None

    @staticmethod
    def _wait(proc: subprocess.Popen, timeout: float) -> int:
        """Waits for login to exit, reading (and dropping) the rest of its stdout meanwhile."""
        try:
            proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Failed(f"login did not exit within {timeout:.1f}s") from None
        return proc.returncode

    def _follow(self, url: str) -> None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(url, timeout=remaining(8.0)) as response:
                response.read()
                final = urllib.parse.urlsplit(response.geturl())
                log(f"redirects ended at {final.scheme}://{final.netloc}{final.path}: "
                    f"HTTP {response.status}")
        except urllib.error.HTTPError as e:
            final = urllib.parse.urlsplit(e.geturl() or url)
            log(f"redirects ended at {final.scheme}://{final.netloc}{final.path}: HTTP {e.code}")
        except (urllib.error.URLError, OSError) as e:
            # The loopback may close before answering once it has the code: login's exit decides.
            log(f"following the authorization URL: {e}")

    def start_broker(self) -> None:
        """Starts the broker on 127.0.0.1 port 0: the port the kernel gave it is in its
        `listening` line."""
        self.broker_log = self.tmp / "broker.log"
        self.broker_log_offset = 0
        self.entries = []
        with self.broker_log.open("wb") as out:
            self.broker = self.spawn(
                ["serve", "--config", str(self.config_path), "--listen", "127.0.0.1:0"],
                stdout=out, stderr=subprocess.STDOUT)
        self.seen = 0  # entries wait_ready has looked at
        while True:
            self.new_log_entries()
            listening = [e for e in self.entries if e.get("message") == "listening"]
            if listening:
                self.addr = f"http://{listening[0]['addr']}"
                log(f"the broker listens on {self.addr}")
                return
            rc = self.broker.poll()
            if rc is not None:
                self.relay_broker_log(final=True)
                raise Failed(f"the broker exited {rc} before listening")
            remaining()
            time.sleep(0.05)

    def wait_ready(self) -> bool:
        """Waits for the server's first session: True once READY (the broker logs it with its
        tool count), False if it failed and did not recover within a few seconds."""
        assert self.broker is not None
        until = time.monotonic() + remaining(12.0)
        failed_at: float | None = None
        while True:
            self.new_log_entries()
            entries, self.seen = self.entries[self.seen:], len(self.entries)
            for entry in entries:
                if entry.get("server") != SERVER:
                    continue
                if "tools" in entry and entry.get("level") == "INFO":
                    log(f"server {SERVER!r} ready ({entry.get('tools')} tools)")
                    return True
                failure = entry.get("level") == "ERROR" or (
                    entry.get("level") == "WARN" and "fail" in str(entry.get("message")).lower())
                if failure and failed_at is None:
                    failed_at = time.monotonic()
                    until = min(until, failed_at + 2.0)  # a quick retry or two at most
            if self.broker.poll() is not None:
                raise Failed(f"the broker exited {self.broker.returncode}")
            if time.monotonic() >= until:
                log(f"server {SERVER!r} not ready" + (" (it failed to start)" if failed_at else ""))
                return False
            time.sleep(0.05)

    def list_tools(self, want: str | None = None, patience: float = 2.0) -> list[str]:
        """`toolbroker tools`: the exposed names; with `want`, polls briefly until it is listed
        (the broker logs READY just before it publishes the tools)."""
        until = time.monotonic() + patience
        while True:
            result = self.run_cli(["tools", "--addr", self.addr], 10.0)
            if result.returncode != 0:
                raise Failed(f"`toolbroker tools` exited {result.returncode}: "
                             f"{result.stderr.strip()[:500]}")
            names = [line.split("(", 1)[0] for line in result.stdout.splitlines()
                     if line and not line[0].isspace()]
            if want is None or want in names or time.monotonic() >= until:
                log(f"tools: {', '.join(names) if names else '(none)'}")
                return names
            time.sleep(0.1)

    def call(self, name: str, arguments: dict) -> None:
        """`toolbroker call`; on a step-up refusal (PERMISSION_DENIED asking for `toolbroker
        login` again), logs in again, sends SIGHUP to the broker and retries."""
        reloaded_at: float | None = None
        while True:
            log(f"call {name} {json.dumps(arguments)}")
            command = ["call", "--addr", self.addr, name, json.dumps(arguments)]
            if self.scenario == "elicitation-sep1034-client-defaults":
                # SEP-1034: the client (here the command line, over CallToolStream) fills in
                # the defaults of the server's question.
                command += ["--stream", "--accept-defaults"]
            result = self.run_cli(command, 20.0)
            self.relay_broker_log()
            if result.returncode == 0:
                log(f"call {name}: ok: {result.stdout.strip()[:300]}")
                return
            error = result.stderr.strip()
            log(f"call {name}: exit {result.returncode}: {error[:500]}")
            if (reloaded_at is not None and time.monotonic() - reloaded_at < 3.0
                    and re.search(r"unavailable", error, re.I)):
                time.sleep(0.3)  # the server may be restarting after the reload
                continue
            step_up = (re.search(r"permission", error, re.I)
                       and re.search(r"toolbroker login", error))
            if not step_up:
                raise Failed(f"call {name} failed")
            if self.logins > MAX_RELOGINS:
                raise Failed(f"call {name} still refused after {self.logins} authorizations")
            log("step-up: the server wants more scope; logging in again")
            self.login()
            assert self.broker is not None
            log("SIGHUP to the broker (it reads the token store again)")
            self.broker.send_signal(signal.SIGHUP)
            reloaded_at = time.monotonic()
            time.sleep(0.5)

    # ---- the scenario -----------------------------------------------------------------------

    def run(self) -> None:
        log(f"scenario {self.scenario!r}, server {self.url}, broker {self.bin}")
        if not os.access(self.bin, os.X_OK):
            raise Failed(f"no broker binary at {self.bin} (cargo build --bins, or TOOLBROKER_BIN)")
        self.write_config()
        scenario = self.scenario
        authorization_code = (scenario.startswith("auth/") and scenario not in CLIENT_CREDENTIALS
                              and scenario != CROSS_APP)
        if authorization_code:
            self.login()
        self.start_broker()
        ready = self.wait_ready()
        if scenario in CORE_CALLS or not scenario.startswith("auth/"):
            call = CORE_CALLS.get(scenario)
            want = exposed_name(call[0]) if call else None
            self.list_tools(want)
            if call:
                self.call(want, call[1])  # made even if not listed: the failure then says why
            elif not ready:
                raise Failed(f"server {SERVER!r} did not become ready")
            return
        if not ready:
            raise Failed(f"server {SERVER!r} did not become ready")
        if scenario in CLIENT_CREDENTIALS:
            self.list_tools()
            return
        tool = exposed_name("test-tool")
        names = self.list_tools(tool)
        if tool in names:
            self.call(tool, {})
        else:
            log(f"{tool} is not listed: no call")


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: adapter.py <server-url>  (run by the MCP conformance suite)", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    try:
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    except ValueError as e:
        print(f"adapter: MCP_CONFORMANCE_CONTEXT is not JSON: {e}", file=sys.stderr)
        return 2
    if context:
        log(f"context keys: {sorted(context)}")

    def terminate(signum, _frame):
        raise Terminated(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, terminate)
    adapter = Adapter(sys.argv[1], scenario, context)
    code = 1
    try:
        adapter.run()
        code = 0
    except Failed as e:
        log(f"FAILED: {e}")
    except Terminated as e:
        log(f"terminated by {e}")
        code = 143
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        adapter.cleanup()
    log(f"exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
