"""The HTTP API's URLs: the apps' routers mounted on the one API (a composition module).

``aetnaweb.api`` is the leaf the apps import (the API object, token auth,
error shapes); the apps' routers are mounted here, where the URLs are built,
so no app module ever imports another app through the API.
"""

from __future__ import annotations

from typing import Any

from django.urls import URLPattern, URLResolver, path, re_path

from access.api import mount as mount_access
from actions.api import mount as mount_actions
from aetnaweb.api import api, unknown_endpoint
from audit.api import mount as mount_audit
from memory.api import mount as mount_memory


def _mount_app_routers() -> None:
    # First: it installs the token authentication every other router relies on.
    mount_access(api)
    mount_memory(api)
    mount_actions(api)
    mount_audit(api)


def _exempt_from_login(patterns: list[Any]) -> None:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            _exempt_from_login(pattern.url_patterns)
        elif isinstance(pattern, URLPattern):
            # Token auth, not sessions: LoginRequiredMiddleware must not redirect agents.
            pattern.callback.login_required = False  # type: ignore[attr-defined]


def api_urls() -> tuple[list[Any], str, str]:
    """What ``aetnaweb/urls.py`` includes under ``api/v1/`` (called once, by the URLconf)."""
    _mount_app_routers()
    patterns, app_name, namespace = api.urls
    _exempt_from_login(patterns)
    # Ninja's root view answers an HTML 404 without docs; keep its name (ninja reverses
    # it to find the API's prefix) but answer JSON like every other unknown path.
    patterns = [
        path("", unknown_endpoint, name="api-root") if getattr(p, "name", None) == "api-root" else p
        for p in patterns
    ]
    patterns = [*patterns, re_path(r"^(?P<rest>.*)$", unknown_endpoint, name="unknown")]
    return patterns, app_name, namespace
