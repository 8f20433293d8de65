"""A live server (pytest-django's ``live_server``, a real threaded HTTP server on
127.0.0.1) and tokens for the client package's end-to-end tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from aetnaweb_client import Client

from tests.api.conftest import issue_token

SCOPE = "acme:alice:proj"


@pytest.fixture
def server_url(live_server) -> str:
    return str(live_server.url)


@pytest.fixture
def make_client(server_url) -> Iterator[Callable[..., Client]]:
    """``make_client("acme:alice:*", ["read"])`` -> a sync client holding a fresh token."""
    opened: list[Client] = []

    def factory(scope: str = "acme:alice:*", capabilities: list[str] | None = None) -> Client:
        client = Client(server_url, token=issue_token(scope, capabilities), retries=0)
        opened.append(client)
        return client

    yield factory
    for client in opened:
        client.close()


@pytest.fixture
def alice(make_client) -> Client:
    return make_client("acme:alice:*")
