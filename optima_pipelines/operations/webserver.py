"""The Dagster UI behind HTTP basic auth: Dagster's own webserver app, wrapped in process.

Dagster's webserver has no auth. We run its own command (``dagster-webserver``: all its options,
its instance tuning, its shutdown handling) in this process and hand uvicorn our
:class:`BasicAuthMiddleware` around the app it builds. The middleware sees every ASGI scope before
Dagster does: every HTTP route (UI pages, static files, ``/graphql``, downloads) and every
WebSocket handshake (GraphQL subscriptions), so there is no route to forget.

Why not a reverse proxy (nginx, or a Python one in front of a stock webserver)? A proxy needs the
webserver listening somewhere else without auth (any local user could go around the proxy), a
second process to run and watch, and WebSocket upgrade forwarding to get right; the in-process
wrapper has none of that. Dagster offers no public hook to build its app outside its own command
(that needs ``dagster._core`` imports), so we wrap the one call it makes to uvicorn instead
(``dagster_internals.serve_with_wrapped_app``, held to the pinned version by a contract test), and
:func:`_fail_closed` makes a drift impossible to miss: when auth is configured and an
unauthenticated request gets anything but 401, the process exits.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from optima_pipelines.errors import ConfigError
from optima_pipelines.orchestration.dagster_internals import serve_with_wrapped_app

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

REALM = "Optima Dagster UI"
#: Exit code when auth is configured but an unauthenticated request was not refused.
EXIT_AUTH_NOT_ENFORCED = 70


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str = field(repr=False)

    @classmethod
    def from_settings(cls, user: str | None, password: str | None) -> Credentials | None:
        """Both set: auth on. Neither: off. One without the other is a mistake, not "off"."""
        if not user and not password:
            return None
        if not user or not password:
            missing = "OPTIMA_UI_USER" if not user else "OPTIMA_UI_PASSWORD"
            raise ConfigError(f"{missing} is not set: set both OPTIMA_UI_USER and OPTIMA_UI_PASSWORD, or neither")
        if ":" in user:
            raise ConfigError("OPTIMA_UI_USER must not contain ':' (basic auth separates user and password by it)")
        return cls(user, password)


class BasicAuthMiddleware:
    """ASGI middleware: HTTP requests and WebSocket handshakes without the right credentials get 401."""

    def __init__(self, app: ASGIApp, credentials: Credentials):
        self.app = app
        self._user = credentials.user.encode()
        self._password = credentials.password.encode()

    def _authorized(self, scope: Scope) -> bool:
        header = next((v for k, v in scope.get("headers", []) if k == b"authorization"), None)
        if header is None or not header[:6].lower() == b"basic ":
            return False
        try:
            user, _, password = base64.b64decode(header[6:].strip(), validate=True).partition(b":")
        except (binascii.Error, ValueError):
            return False
        # Compare both, always, in constant time: no early exit that tells a right user name apart.
        user_ok = secrets.compare_digest(user, self._user)
        password_ok = secrets.compare_digest(password, self._password)
        return user_ok and password_ok

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        headers = [
            (b"www-authenticate", f'Basic realm="{REALM}", charset="UTF-8"'.encode()),
            (b"content-type", b"text/plain; charset=utf-8"),
        ]
        body = b"401 Unauthorized: this Dagster UI needs a user name and password\n"
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        # A WebSocket handshake: answer it with a plain 401 where the server supports that
        # (the ASGI "denial response" extension), else refuse the upgrade (the server sends 403).
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": 401, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})


def _wait_for_port(host: str, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def _fail_closed(host: str, port: int, path_prefix: str, timeout: float = 600) -> None:
    """Once the server listens, ask it without credentials; anything but 401 ends the process."""
    probe_host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    if not _wait_for_port(probe_host, port, timeout):
        return
    try:
        status = httpx.get(f"http://{probe_host}:{port}{path_prefix}/server_info", timeout=10).status_code
    except httpx.HTTPError as exc:
        logger.warning("could not self-check basic auth: %s", exc.__class__.__name__)
        return
    if status != 401:
        print(
            f"error: basic auth is configured but an unauthenticated request got HTTP {status}: "
            "refusing to serve the UI open (did the Dagster upgrade change how the webserver starts?)",
            file=sys.stderr,
            flush=True,
        )
        os._exit(EXIT_AUTH_NOT_ENFORCED)


def _option(args: list[str], *names: str, default: str) -> str:
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(f"{name}="):
                return arg.split("=", 1)[1]
    return default


def run(args: list[str], credentials: Credentials | None) -> None:
    """Run ``dagster-webserver ARGS`` in this process, behind basic auth when credentials are given."""
    from dagster_webserver import cli as webserver_cli

    def serve() -> None:
        webserver_cli.cli.main(args=args, prog_name="dagster-webserver", auto_envvar_prefix="DAGSTER_WEBSERVER")

    if credentials is None:
        serve()
        return
    host = _option(args, "-h", "--host", default="127.0.0.1")
    port = int(_option(args, "-p", "--port", default="3000"))
    prefix = _option(args, "-l", "--path-prefix", default="")
    threading.Thread(target=_fail_closed, args=(host, port, prefix), daemon=True).start()
    serve_with_wrapped_app(lambda app: BasicAuthMiddleware(app, credentials), serve)
