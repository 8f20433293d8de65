"""The access pages' URLs, mounted by ``aetnaweb/urls.py`` under two namespaces.

``/access/tokens/`` is ``tokens:list`` and ``tokens:revoke``; ``/access/lockouts/``
is ``lockouts:list`` and ``lockouts:clear`` (the names from before the pages
moved into this app, so templates and bookmarks keep working).
"""

from __future__ import annotations

from django.urls import URLPattern, path

from access import views

tokens: tuple[list[URLPattern], str] = (
    [
        path("", views.token_list, name="list"),
        path("<str:prefix>/revoke/", views.token_revoke, name="revoke"),
    ],
    "tokens",
)

lockouts: tuple[list[URLPattern], str] = (
    [
        path("", views.lockout_list, name="list"),
        path("<int:throttle_id>/clear/", views.lockout_clear, name="clear"),
    ],
    "lockouts",
)
