"""ASGI entry point: Django, with MCP over streamable HTTP at ``/mcp/``.

Run it with an ASGI server (``uvicorn aetnaweb.asgi:application``, or
``manage.py mcp --http``): one process serves the dashboard, ``/api/v1/`` and
``/mcp/`` with the same database and API tokens. The MCP route goes straight
to the SDK's ASGI transport (after token authentication in
:mod:`aetnaweb.agent_mcp`), because Django's request/response cycle cannot
carry its JSON-RPC exchange; everything else is Django as usual.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aetnaweb.settings")
django_application = get_asgi_application()

# Imported after Django is set up: it imports the apps' models.
from aetnaweb.agent_mcp import McpHttpApp, is_mcp_path  # noqa: E402

mcp_application = McpHttpApp()


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and is_mcp_path(scope.get("path", "")):
        await mcp_application(scope, receive, send)
        return
    await django_application(scope, receive, send)
