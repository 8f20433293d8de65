"""The API-token page, mounted at ``/access/tokens/``."""

from __future__ import annotations

from django.urls import path

from aetnaweb import token_views

app_name = "tokens"

urlpatterns = [
    path("", token_views.token_list, name="list"),
    path("<str:prefix>/revoke/", token_views.token_revoke, name="revoke"),
]
