"""``manage.py mcp``: the agent tools over MCP, on stdio or over streamable HTTP.

``mcp --scope SCOPE``: an agent host launches it (usually as ``aetnaweb mcp
--scope acme:alice:proj``, settings and database from the environment) and
speaks the Model Context Protocol on its stdin and stdout. The scope is fixed
here, on the command line; no tool lets the model choose another. Logs go to
stderr only: stdout is the protocol.

``mcp --http [--host 127.0.0.1] [--port 8001]``: serves the whole ASGI
application (dashboard, ``/api/v1/`` and ``/mcp/``) with uvicorn, for hosts
that connect over HTTP with an API token. In production run the same
``aetnaweb.asgi:application`` under your ASGI server instead.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser

from aetnaweb.agent_mcp import build_server
from aetnaweb.scopes import Scope, ScopeError
from memory.mcp_server import (
    DEFAULT_CAPABILITIES,
    MCP_CAPABILITIES,
    bound_principal,
    serve_stdio,
)

REFUSED = 2


class Command(BaseCommand):
    help = (
        "Serve the agent tools over MCP: on stdio bound to one scope (--scope), or over "
        "streamable HTTP with API-token auth (--http)."
    )
    # The protocol owns stdout from the first byte: no system-check banner.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scope",
            help="The one scope every tool acts at, e.g. acme:alice:proj (recall also sees its "
            "ancestors).",
        )
        parser.add_argument(
            "--capabilities",
            default=",".join(sorted(DEFAULT_CAPABILITIES)),
            help=f"Comma-separated subset of {','.join(sorted(MCP_CAPABILITIES))} "
            "(default: all of them). Use 'read' for a read-only session.",
        )
        parser.add_argument(
            "--name",
            default="mcp",
            help="Recorded in the audit chain as the actor 'agent:<name>' (default: mcp).",
        )

        parser.add_argument(
            "--http",
            action="store_true",
            help="Serve MCP over streamable HTTP at /mcp/ (with the rest of the site) instead "
            "of stdio; clients authenticate with an API token.",
        )
        parser.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1).")
        parser.add_argument("--port", type=int, default=8001, help="HTTP port (default 8001).")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["http"]:
            self._serve_http(options)
            return
        if not options["scope"]:
            raise CommandError(
                "give --scope SCOPE for stdio (or --http to serve MCP over HTTP)",
                returncode=REFUSED,
            )
        try:
            scope = Scope.parse(options["scope"])
        except ScopeError as exc:
            raise CommandError(str(exc), returncode=REFUSED) from exc
        capabilities = [c.strip() for c in options["capabilities"].split(",") if c.strip()]
        name = options["name"].strip()
        if not name or len(name) > 100 or any(c.isspace() for c in name):
            raise CommandError(
                "--name must be 1 to 100 characters without spaces", returncode=REFUSED
            )
        try:
            bound_principal(scope, capabilities, name=name)
        except ValueError as exc:
            raise CommandError(str(exc), returncode=REFUSED) from exc
        self._log_to_stderr()
        server = build_server(bound_principal(scope, capabilities, name=name), scope)
        logging.getLogger("aetnaweb.mcp").info("serving MCP over stdio at scope %s", scope)
        anyio.run(serve_stdio, server)

    def _serve_http(self, options: dict[str, Any]) -> None:
        if options["scope"]:
            raise CommandError(
                "--scope is for stdio: over HTTP the API token decides the scope "
                "(or the client adds ?scope=... to the URL)",
                returncode=REFUSED,
            )
        if not 0 < options["port"] < 65536:
            raise CommandError("--port must be 1 to 65535", returncode=REFUSED)
        import uvicorn  # only the HTTP mode needs it (installed with mcp)

        self.stderr.write(
            f"serving MCP over streamable HTTP at http://{options['host']}:{options['port']}/mcp/"
        )
        uvicorn.run(
            "aetnaweb.asgi:application",
            host=options["host"],
            port=options["port"],
            log_level="warning",
            lifespan="off",
        )

    def _log_to_stderr(self) -> None:
        # Django's console handler already writes to stderr; make sure nothing
        # configured later (or by the SDK) can write log lines to stdout.
        for handler in logging.getLogger().handlers:
            stream = getattr(handler, "stream", None)
            if stream is sys.stdout:
                handler.setStream(sys.stderr)  # type: ignore[attr-defined]
