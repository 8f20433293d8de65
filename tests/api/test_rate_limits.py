"""Per-token rate limits (access/ratelimits.py): 429 with Retry-After, overrides, the token page."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from access import ratelimits, tokens
from access.models import ApiToken, RateLimitWindow, ScopeGrant
from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from memory.models import Record
from tests.api.conftest import issue_token

S = "acme:alice:proj"


def _get(client: Client, secret: str):
    return client.get("/api/v1/token", headers={"Authorization": f"Bearer {secret}"})


def _remember(client: Client, secret: str, text: str):
    return client.post(
        "/api/v1/memory/remember",
        data=json.dumps({"scope": S, "text": text}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )


def test_over_the_default_limit_is_429_with_retry_after_and_writes_nothing(client, db, settings):
    # Given a server default of 3 requests per minute
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 3
    secret = issue_token("acme:alice:*")
    for _ in range(3):
        assert _get(client, secret).status_code == 200
    records, events = Record.objects.count(), AuditEvent.objects.count()
    # When the token makes a fourth request (a write)
    response = _remember(client, secret, "My car is red.")
    # Then it is 429 in the JSON error shape, says when to retry, and wrote nothing
    assert response.status_code == 429
    assert response.json()["error"] == "rate_limited"
    assert response.json()["field"] is None
    assert "3 requests per minute" in response.json()["detail"]
    assert 1 <= int(response["Retry-After"]) <= 60
    assert (Record.objects.count(), AuditEvent.objects.count()) == (records, events)


def test_a_token_override_wins_over_the_default(client, db, settings):
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 1
    secret = issue_token("acme:alice:*")
    ApiToken.objects.update(rate_limit_per_minute=5)
    assert [_get(client, secret).status_code for _ in range(6)] == [200] * 5 + [429]


def test_zero_means_unlimited_and_counts_nothing(client, db, settings):
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 0
    secret = issue_token("acme:alice:*")
    assert all(_get(client, secret).status_code == 200 for _ in range(5))
    assert RateLimitWindow.objects.count() == 0


def test_limits_are_per_token(client, db, settings):
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 1
    first, second = issue_token("acme:alice:*"), issue_token("acme:alice:*", name="b")
    assert _get(client, first).status_code == 200
    assert _get(client, first).status_code == 429
    assert _get(client, second).status_code == 200


def test_a_new_window_resets_the_count_and_drops_old_windows(db, settings):
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 1
    issue_token("acme:alice:*")
    token = ApiToken.objects.get()
    t0 = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
    ratelimits.consume(token, now=t0)
    with pytest.raises(ratelimits.RateLimited) as refused:
        ratelimits.consume(token, now=t0 + timedelta(seconds=10))
    assert refused.value.retry_after == 20  # until 12:01:00
    usage = ratelimits.consume(token, now=t0 + timedelta(seconds=40))
    assert usage.used == 1
    assert list(RateLimitWindow.objects.values_list("window_start", flat=True)) == [
        int((t0 + timedelta(seconds=40)).timestamp()) // 60 * 60
    ]


def test_a_bad_token_is_401_not_counted(client, db, settings):
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 1
    assert _get(client, "aetna_x_y").status_code == 401
    assert RateLimitWindow.objects.count() == 0


def test_an_idempotent_replay_counts_too(client, db, settings):
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 2
    secret = issue_token("acme:alice:*")
    headers = {"Authorization": f"Bearer {secret}", "Idempotency-Key": "k"}
    body = json.dumps({"scope": S, "text": "My car is red."})

    def send():
        return client.post(
            "/api/v1/memory/remember", data=body, content_type="application/json", headers=headers
        )

    assert [send().status_code for _ in range(3)] == [201, 201, 429]


@pytest.mark.django_db(transaction=True)
def test_the_count_is_shared_across_connections(settings):
    # Given a limit of 5 and 4 threads (separate connections) making 3 requests each
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 5
    secret = issue_token("acme:alice:*")
    statuses: list[int] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        try:
            barrier.wait()
            for _ in range(3):
                statuses.append(_get(Client(), secret).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    # Then exactly 5 got through, whatever the interleaving
    assert sorted(statuses) == [200] * 5 + [429] * 7
    assert RateLimitWindow.objects.get().count == 12


def test_create_token_refuses_a_negative_limit_and_writes_nothing(db):
    with pytest.raises(tokens.TokenError):
        tokens.create_token(
            principal=SYSTEM,
            name="bot",
            scope="acme:alice:*",
            capabilities=["read"],
            expires_at=timezone.now() + timedelta(days=1),
            rate_limit_per_minute=-1,
        )
    assert ApiToken.objects.count() == 0
    assert AuditEvent.objects.count() == 0


def test_the_token_page_shows_limits_and_creates_with_an_override(
    client, django_user_model, settings
):
    # Given an admin and a token that has made two requests this minute
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 600
    user = django_user_model.objects.create_user("ops", password="x")
    ScopeGrant.objects.create(
        user=user,
        scope="acme:*:*",
        scope_tenant="acme",
        scope_user="*",
        scope_project="*",
        role="admin",
    )
    secret = issue_token("acme:alice:*", name="busy-bot")
    _get(client, secret)
    _get(client, secret)
    client.force_login(user)
    # When the operator opens the token page
    page = client.get("/access/tokens/")
    # Then the limit (default) and the usage are shown
    html = page.content.decode()
    assert "600/min" in html and "(default)" in html
    assert "2 this minute" in html
    # And creating a token with its own limit stores it
    created = client.post(
        "/access/tokens/",
        {
            "name": "slow-bot",
            "scope": "acme:alice:*",
            "capabilities": ["read"],
            "expires_in_days": 7,
            "rate_limit_per_minute": 10,
        },
    )
    assert created.status_code == 201
    assert ApiToken.objects.get(name="slow-bot").rate_limit_per_minute == 10
    assert "10/min" in client.get("/access/tokens/").content.decode()
    # And a negative limit is a form error that writes nothing
    refused = client.post(
        "/access/tokens/",
        {
            "name": "bad-bot",
            "scope": "acme:alice:*",
            "capabilities": ["read"],
            "expires_in_days": 7,
            "rate_limit_per_minute": -1,
        },
    )
    assert refused.status_code == 400
    assert not ApiToken.objects.filter(name="bad-bot").exists()
