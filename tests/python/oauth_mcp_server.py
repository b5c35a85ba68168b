"""A protected MCP server for the tests: the Python `mcp` SDK 2.x as an OAuth resource server.

It serves streamable HTTP at /mcp on 127.0.0.1 and lets the SDK do the resource server's part:
RFC 9728 protected-resource metadata at /.well-known/oauth-protected-resource/mcp, 401 with
`WWW-Authenticate: Bearer error="invalid_token", ..., resource_metadata="..."` for a missing or
refused token, 403 `insufficient_scope` for a token without a `--required-scope`, and a token
accepted only when it was issued for this server (its `aud` is this server's URL, RFC 8707).
Tokens are checked by RFC 7662 introspection at `--introspect` (no client authentication), on
every request, so a token revoked at the authorization server is refused at once.

Tools: `echo(text)` returns the text; `whoami()` returns JSON with the token's client id, scopes,
subject and resource as introspected (never the token); `admin_action()` needs scope `admin`.

The SDK checks scopes only for the whole endpoint (`AuthSettings.required_scopes`), not per tool,
so the step-up challenge of `admin_action` (HTTP 403, `WWW-Authenticate: Bearer
error="insufficient_scope", scope="admin", ...`, as the MCP authorization spec's scope challenge
describes) comes from a small ASGI wrapper of this file around the SDK's app, which reads the
JSON-RPC body of POSTs to /mcp before the SDK does. The tool checks the scope again itself.

Usage: oauth_mcp_server.py --port 0 --issuer URL --introspect URL [--required-scope S]...
Prints one JSON line, {"listening": true, "url": "http://127.0.0.1:PORT/mcp"}, once it accepts
connections.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl
from serving import bind, serve

# Tools that need a scope beyond the endpoint's required ones.
TOOL_SCOPES = {"admin_action": "admin"}


class IntrospectionVerifier:
    """A `TokenVerifier` asking the authorization server about each token (RFC 7662)."""

    def __init__(self, introspect_url: str):
        self.introspect_url = introspect_url

    async def verify_token(self, token: str) -> AccessToken | None:
        body = await anyio.to_thread.run_sync(self._introspect, token)
        if not body or body.get("active") is not True:
            return None
        aud = body.get("aud")
        if isinstance(aud, list):
            aud = aud[0] if aud else None
        claims = {"iss": body["iss"]} if body.get("iss") else None
        return AccessToken(
            token=token,
            client_id=str(body.get("client_id", "")),
            scopes=str(body.get("scope") or "").split(),
            expires_at=body.get("exp"),
            resource=aud,
            subject=body.get("sub"),
            claims=claims,
        )

    def _introspect(self, token: str) -> dict[str, Any] | None:
        data = urllib.parse.urlencode({"token": token}).encode()
        request = urllib.request.Request(
            self.introspect_url,
            data=data,
            headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as error:
            print(f"introspection failed: {error}", file=sys.stderr, flush=True)
            return None


class ToolScopes:
    """ASGI wrapper: answers 403 insufficient_scope to a `tools/call` of a tool in `TOOL_SCOPES`
    whose bearer token lacks the tool's scope. Everything else goes to the SDK untouched."""

    def __init__(self, app: Any, verifier: IntrospectionVerifier, path: str, resource_metadata_url: str):
        self.app = app
        self.verifier = verifier
        self.path = path
        self.resource_metadata_url = resource_metadata_url

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        needed = self._scope_needed(body)
        if needed is not None:
            token = self._bearer(scope)
            access = await self.verifier.verify_token(token) if token else None
            # A missing or refused token is the SDK's to answer (401).
            if access is not None and needed not in access.scopes:
                await self._insufficient_scope(send, needed)
                return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    def _scope_needed(body: bytes) -> str | None:
        try:
            message = json.loads(body)
        except ValueError:
            return None
        messages = message if isinstance(message, list) else [message]
        for m in messages:
            if isinstance(m, dict) and m.get("method") == "tools/call":
                name = (m.get("params") or {}).get("name")
                if name in TOOL_SCOPES:
                    return TOOL_SCOPES[name]
        return None

    @staticmethod
    def _bearer(scope: dict) -> str | None:
        for key, value in scope["headers"]:
            if key.lower() == b"authorization":
                text = value.decode("latin-1")
                if text.lower().startswith("bearer "):
                    return text[7:]
        return None

    async def _insufficient_scope(self, send: Any, needed: str) -> None:
        description = f"Required scope: {needed}"
        body = json.dumps({"error": "insufficient_scope", "error_description": description}).encode()
        challenge = (
            f'Bearer error="insufficient_scope", scope="{needed}", '
            f'resource_metadata="{self.resource_metadata_url}", error_description="{description}"'
        )
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", challenge.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def build(url: str, issuer: str, introspect: str, required_scopes: list[str]) -> tuple[Any, str]:
    """The ASGI app serving `url`, and its protected-resource metadata URL."""
    verifier = IntrospectionVerifier(introspect)
    server = MCPServer(
        name="oauth-test-server",
        token_verifier=verifier,
        log_level="WARNING",
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(issuer),
            resource_server_url=AnyHttpUrl(url),
            required_scopes=required_scopes or None,
            validate_token_resource=True,
        ),
    )

    @server.tool()
    def echo(text: str) -> str:
        """Returns the text."""
        return text

    @server.tool()
    def whoami() -> str:
        """The client id, scopes, subject and resource of the bearer token, as introspected."""
        token = get_access_token()
        if token is None:
            return json.dumps(None)
        return json.dumps(
            {
                "client_id": token.client_id,
                "scopes": token.scopes,
                "subject": token.subject,
                "resource": token.resource,
            }
        )

    @server.tool()
    def admin_action() -> str:
        """Needs scope `admin` (a step-up: 403 insufficient_scope without it)."""
        token = get_access_token()
        if token is None or "admin" not in token.scopes:
            raise ValueError("scope admin is required")
        return "admin action done"

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    metadata_url = str(build_resource_metadata_url(AnyHttpUrl(url)))
    return ToolScopes(app, verifier, "/mcp", metadata_url), metadata_url


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--issuer", required=True, help="the authorization server's issuer URL")
    parser.add_argument("--introspect", required=True, help="its RFC 7662 introspection endpoint")
    parser.add_argument("--required-scope", action="append", default=[], dest="required_scopes")
    args = parser.parse_args()

    # Bind first: the resource URL (in the metadata and the tokens' audience) has the port in it.
    sock = bind(args.port)
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    app, _ = build(url, args.issuer, args.introspect, args.required_scopes)
    await serve(app, sock, url)


if __name__ == "__main__":
    asyncio.run(main())
