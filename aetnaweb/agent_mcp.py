"""MCP for agents: the memory tools and the stage tool, over stdio or streamable HTTP.

A composition module (like ``aetnaweb.api_urls``): it may import memory and
actions, and no app imports it.

- **stdio** (``manage.py mcp --scope SCOPE``): the host starts the process;
  the session acts as a principal bound to that scope's subtree.
- **streamable HTTP** at ``/mcp/`` of the ASGI application
  (``aetnaweb.asgi:application``): the same server process, database and
  API tokens as ``/api/v1/``. Each request carries ``Authorization: Bearer
  aetna_...``; the token's principal (its scope subtree and capabilities) is
  what every service call is checked against, never the system principal.
  The session scope is the token's scope, or a narrower one given as
  ``/mcp/?scope=tenant:user:project`` (a scope outside the token's subtree
  is a 404, like the HTTP API).

The HTTP transport is stateless (each POST is answered in full as JSON), so
any number of server processes can serve it behind one load balancer, and
a revoked or expired token stops working on its very next request.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from threading import Lock
from typing import Any
from urllib.parse import parse_qs

import anyio
import anyio.to_thread
from django.conf import settings
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host
from mcp.server import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from access import tokens
from actions.mcp_tools import add_action_tools
from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope, ScopeError
from memory.mcp_server import add_memory_resources, add_memory_tools, new_server, refusal_for

MCP_PATH = "/mcp"
# A request body larger than this is refused before it is parsed (the largest
# tool argument, a remembered text, is far smaller).
MAX_BODY_BYTES = 1_000_000
SERVER_CACHE_SIZE = 256


def build_server(principal: Principal, scope: Scope) -> MCPServer:
    """Every tool and resource ``principal`` may use with ``scope`` as the session scope."""
    server = new_server(scope)
    add_memory_tools(server, principal, scope)
    add_action_tools(server, principal, scope)
    add_memory_resources(server, principal, scope)
    return server


class _ServerCache:
    """Built servers by (token, scope): building one costs milliseconds per request.

    The key holds everything the server depends on (the principal's label,
    bindings and the session scope), so a token whose capabilities changed
    gets a new server. Authentication is never cached: each request is
    checked against the database.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._servers: OrderedDict[tuple[Any, ...], MCPServer] = OrderedDict()
        self._lock = Lock()

    def get(self, principal: Principal, scope: Scope) -> MCPServer:
        key = (principal.token_id, principal.label, principal.bindings, str(scope))
        with self._lock:
            server = self._servers.get(key)
            if server is not None:
                self._servers.move_to_end(key)
                return server
        server = build_server(principal, scope)
        with self._lock:
            self._servers[key] = server
            while len(self._servers) > self._size:
                self._servers.popitem(last=False)
        return server


class McpRefusal(Exception):
    """A request refused before MCP sees it: an HTTP status and a JSON error body."""

    def __init__(self, status: int, error: str, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.error = error
        self.detail = detail
        self.field = field


def session_for(authorization: str | None, query_string: str) -> tuple[Principal, Scope]:
    """The token's principal and the session scope, or :class:`McpRefusal` (401/400/404)."""
    scheme, _, raw = (authorization or "").partition(" ")
    if not authorization:
        raise McpRefusal(
            401, "unauthorized", "missing API token: send 'Authorization: Bearer <token>'"
        )
    if scheme.lower() != "bearer" or not raw.strip():
        raise McpRefusal(
            401, "unauthorized", "malformed Authorization header: expected 'Bearer <token>'"
        )
    close_old_connections()
    try:
        token = tokens.authenticate(raw.strip())
    except tokens.TokenAuthenticationError as exc:
        raise McpRefusal(401, "unauthorized", str(exc)) from exc
    finally:
        close_old_connections()
    principal = access.token_principal(token)
    requested = parse_qs(query_string, keep_blank_values=True).get("scope")
    if not requested:
        return principal, Scope.parse(token.scope)
    if len(requested) > 1:
        raise McpRefusal(400, "invalid_scope", "give scope once", "scope")
    try:
        scope = Scope.parse(requested[0])
    except ScopeError as exc:
        raise McpRefusal(400, "invalid_scope", str(exc), "scope") from exc
    if not any(granted.covers(scope) for granted, _ in principal.bindings):
        # Outside the token's subtree: the HTTP API's answer, so nothing leaks.
        raise McpRefusal(404, "not_found", "not found (or outside this token's scope)")
    return principal, scope


class McpHttpApp:
    """The ASGI application behind ``/mcp/``: token auth, then the SDK's streamable HTTP."""

    def __init__(self) -> None:
        self._servers = _ServerCache(SERVER_CACHE_SIZE)
        # The SDK logs each failed tool call's message at INFO; a refusal may
        # quote the user's words (what a forget did not match), which stay out
        # of the server's logs.
        logging.getLogger("mcp").setLevel(logging.WARNING)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            self._check_host(headers.get("host", ""))
            principal, session_scope = await anyio.to_thread.run_sync(
                session_for,
                headers.get("authorization"),
                scope.get("query_string", b"").decode("latin-1"),
            )
        except McpRefusal as refusal:
            await _refuse(send, refusal)
            return
        if scope.get("method") == "POST":
            body = await _read_body(receive)
            if body is None:
                await _refuse(send, McpRefusal(413, "too_large", "request body over 1 MB"))
                return
            answer = refusal_for(body.decode("utf-8", errors="replace"))
            if answer is not None:
                # A lone surrogate: the SDK would answer only "parse error"; this
                # names the argument, exactly like the stdio transport.
                await _send_json(send, 200, answer.model_dump(by_alias=True, exclude_none=True))
                return
            receive = _replay(body, receive)
        server = await anyio.to_thread.run_sync(self._servers.get, principal, session_scope)
        # Stateless: a fresh manager per request (one run() each, as the SDK requires).
        manager = StreamableHTTPSessionManager(
            app=server._lowlevel_server,
            json_response=True,
            stateless=True,
            max_request_body_size=MAX_BODY_BYTES,
        )
        async with manager.run():
            await manager.handle_request(scope, receive, send)

    @staticmethod
    def _check_host(host: str) -> None:
        # Django's ALLOWED_HOSTS, as for every other URL (the MCP route bypasses
        # Django's request handling, so it checks the Host header itself).
        domain, _port = split_domain_port(host)
        allowed = list(settings.ALLOWED_HOSTS)
        if settings.DEBUG and not allowed:
            allowed = [".localhost", "127.0.0.1", "[::1]"]
        if not domain or not validate_host(domain, allowed):
            raise McpRefusal(400, "bad_host", "invalid Host header")


async def _read_body(receive: Any) -> bytes | None:
    """The whole request body, or ``None`` past :data:`MAX_BODY_BYTES`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    """An ASGI ``receive`` that hands the SDK the body already read, then the real messages."""
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # type: ignore[no-any-return]

    return replayed


async def _send_json(
    send: Any, status: int, payload: Any, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    )
    await send({"type": "http.response.body", "body": body})


async def _refuse(send: Any, refusal: McpRefusal) -> None:
    challenge = [(b"www-authenticate", b'Bearer realm="aetnaweb"')] if refusal.status == 401 else []
    await _send_json(
        send,
        refusal.status,
        {"error": refusal.error, "field": refusal.field, "detail": refusal.detail},
        challenge,
    )


def is_mcp_path(path: str) -> bool:
    return path in (MCP_PATH, MCP_PATH + "/")
