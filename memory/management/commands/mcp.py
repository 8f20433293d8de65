"""``manage.py mcp --scope SCOPE``: the memory verbs as MCP tools over stdio.

An agent host launches it (usually as ``aetnaweb mcp --scope acme:alice:proj``,
settings and database from the environment) and speaks the Model Context
Protocol on its stdin and stdout. The scope is fixed here, on the command
line; no tool lets the model choose another. Logs go to stderr only: stdout is
the protocol.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser

from aetnaweb.scopes import Scope, ScopeError
from memory.mcp_server import (
    DEFAULT_CAPABILITIES,
    MCP_CAPABILITIES,
    bound_principal,
    build_server,
    serve_stdio,
)

REFUSED = 2


class Command(BaseCommand):
    help = "Serve the memory verbs as MCP tools over stdio, bound to one scope."
    # The protocol owns stdout from the first byte: no system-check banner.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scope",
            required=True,
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

    def handle(self, *args: Any, **options: Any) -> None:
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
        server = build_server(scope, capabilities=capabilities, name=name)
        logging.getLogger("aetnaweb.mcp").info("serving MCP over stdio at scope %s", scope)
        anyio.run(serve_stdio, server)

    def _log_to_stderr(self) -> None:
        # Django's console handler already writes to stderr; make sure nothing
        # configured later (or by the SDK) can write log lines to stdout.
        for handler in logging.getLogger().handlers:
            stream = getattr(handler, "stream", None)
            if stream is sys.stdout:
                handler.setStream(sys.stderr)  # type: ignore[attr-defined]
