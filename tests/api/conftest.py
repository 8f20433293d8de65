"""Fixtures for the HTTP API tests: tokens and a JSON client speaking Bearer auth."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from access import tokens
from aetnaweb.access import SYSTEM, TOKEN_CAPABILITIES

ALL_TOKEN_CAPS = sorted(TOKEN_CAPABILITIES)


def issue_token(
    scope: str, capabilities: list[str] | None = None, *, name: str = "test-agent", days: int = 30
) -> str:
    """A live token's secret, bound to ``scope`` with ``capabilities`` (default: all a token may hold)."""
    issued = tokens.create_token(
        principal=SYSTEM,
        name=name,
        scope=scope,
        capabilities=capabilities or ALL_TOKEN_CAPS,
        expires_at=timezone.now() + timedelta(days=days),
    )
    return issued.secret


class ApiClient:
    """``api.post("/memory/remember", {...})`` -> the response, JSON parsed as ``.data``."""

    def __init__(self, client: Client, secret: str | None) -> None:
        self.client = client
        self.secret = secret

    def _headers(self, secret: str | None) -> dict[str, str]:
        secret = self.secret if secret is None else secret
        return {"Authorization": f"Bearer {secret}"} if secret else {}

    def get(self, path: str, params: dict[str, Any] | None = None, *, secret: str | None = None):
        response = self.client.get(f"/api/v1{path}", params or {}, headers=self._headers(secret))
        return _with_data(response)

    def post(
        self,
        path: str,
        body: Any = None,
        *,
        secret: str | None = None,
        raw: bytes | str | None = None,
    ):
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        response = self.client.post(
            f"/api/v1{path}",
            data=data,
            content_type="application/json",
            headers=self._headers(secret),
        )
        return _with_data(response)


def _with_data(response):
    content_type = response.get("Content-Type", "")
    is_json = content_type.startswith("application/json")
    response.data = json.loads(response.content) if is_json and not response.streaming else None
    return response


@pytest.fixture
def make_api(client) -> Callable[..., ApiClient]:
    """``make_api("acme:alice:*", ["read"])`` -> a client holding a fresh token."""

    def factory(scope: str = "acme:alice:*", capabilities: list[str] | None = None) -> ApiClient:
        return ApiClient(client, issue_token(scope, capabilities))

    return factory


@pytest.fixture
def alice_api(make_api) -> ApiClient:
    """A token for acme:alice:* holding every capability a token may hold."""
    return make_api("acme:alice:*")


@pytest.fixture
def actions_root(tmp_path, settings):
    """The filesystem adapter rooted at a fresh directory."""
    root = tmp_path / "actions-root"
    root.mkdir()
    settings.AETNAWEB_ACTIONS_ROOT = str(root)
    return root
