"""Per-token rate limits (access/ratelimits.py): 429 with Retry-After, overrides, the token page."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from access import ratelimits, tokens
from access.models import ApiToken, RateLimitWindow, ScopeGrant
from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from memory.models import Record
from tests.api.conftest import issue_token
from tests.factories import start_well_inside_a_minute

S = "acme:alice:proj"


@pytest.fixture
def one_window() -> None:
    """The test's real requests all fall in one fixed one-minute window."""
    start_well_inside_a_minute()


def _get(client: Client, secret: str):
    return client.get("/api/v1/token", headers={"Authorization": f"Bearer {secret}"})


def _remember(client: Client, secret: str, text: str):
    return client.post(
        "/api/v1/memory/remember",
        data=json.dumps({"scope": S, "text": text}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )


def test_over_the_default_limit_is_429_with_retry_after_and_writes_nothing(
    client, db, settings, one_window
):
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


def test_a_token_override_wins_over_the_default(client, db, settings, one_window):
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 1
    secret = issue_token("acme:alice:*")
    ApiToken.objects.update(rate_limit_per_minute=5)
    assert [_get(client, secret).status_code for _ in range(6)] == [200] * 5 + [429]


def test_zero_means_unlimited_and_counts_nothing(client, db, settings):
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 0
    secret = issue_token("acme:alice:*")
    assert all(_get(client, secret).status_code == 200 for _ in range(5))
    assert RateLimitWindow.objects.count() == 0


def test_limits_are_per_token(client, db, settings, one_window):
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


def test_an_idempotent_replay_counts_too(client, db, settings, one_window):
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
def test_the_count_is_shared_across_connections(settings, one_window):
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
    # And the refusals wrote nothing: the row counts the five admitted requests
    assert RateLimitWindow.objects.get().count == 5


def _token_with_limit(limit: int) -> ApiToken:
    issue_token("acme:alice:*")
    token = ApiToken.objects.get()
    token.rate_limit_per_minute = limit
    token.save(update_fields=["rate_limit_per_minute"])
    return token


def _rate_limit_writes(captured) -> int:
    return sum(
        1 for q in captured if q["sql"].startswith("INSERT") and "ratelimitwindow" in q["sql"]
    )


def test_a_busy_token_is_counted_in_blocks_and_never_passes_its_limit(db, settings):
    # Given a token allowed 1,000 requests a minute, all made within one second
    settings.AETNAWEB_API_RATE_LIMIT_BLOCK = 16
    token = _token_with_limit(1000)
    now = datetime(2026, 1, 1, 12, 0, 0, 500000, tzinfo=UTC)
    # When it makes 1,200 requests
    admitted = 0
    with CaptureQueriesContext(connection) as captured:
        for _ in range(1200):
            try:
                ratelimits.consume(token, now=now)
                admitted += 1
            except ratelimits.RateLimited:
                pass
    # Then exactly its limit got through, with far fewer statements than requests
    assert admitted == 1000
    writes = _rate_limit_writes(captured)
    assert writes < 1000 / 8
    # And the row never says more than the limit (the blocks shrink near it)
    assert RateLimitWindow.objects.get().count == 1000


def test_block_of_one_counts_every_request(db, settings):
    settings.AETNAWEB_API_RATE_LIMIT_BLOCK = 1
    token = _token_with_limit(1000)
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    with CaptureQueriesContext(connection) as captured:
        for _ in range(50):
            ratelimits.consume(token, now=now)
    assert _rate_limit_writes(captured) == 50
    assert RateLimitWindow.objects.get().count == 50


def test_requests_reserved_by_other_processes_count_against_the_limit(db, settings):
    # Given a token allowed 100 a minute, of which other processes already reserved 95
    settings.AETNAWEB_API_RATE_LIMIT_BLOCK = 16
    token = _token_with_limit(100)
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    RateLimitWindow.objects.create(token=token, window_start=_window(now), count=95)
    # When this process makes requests as fast as it can
    outcomes = []
    for _ in range(10):
        try:
            ratelimits.consume(token, now=now)
            outcomes.append(200)
        except ratelimits.RateLimited:
            outcomes.append(429)
    # Then only the 5 left are admitted here
    assert outcomes == [200] * 5 + [429] * 5
    assert RateLimitWindow.objects.get().count == 100


def test_a_block_that_races_another_process_past_the_limit_is_granted_only_up_to_it(db, settings):
    # Given a busy token (limit 100) that this process has used 40 times this second
    settings.AETNAWEB_API_RATE_LIMIT_BLOCK = 16
    token = _token_with_limit(100)
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    for _ in range(40):
        ratelimits.consume(token, now=now)
    row = RateLimitWindow.objects.get()
    # When another process reserves all but one of what is left in the database
    others = 100 - row.count - 1
    RateLimitWindow.objects.filter(pk=row.pk).update(count=row.count + others)
    admitted = 40
    while True:
        try:
            ratelimits.consume(token, now=now)
        except ratelimits.RateLimited:
            break
        admitted += 1
    # Then this process admits only what the other left: the limit holds overall
    assert admitted + others == 100


def test_a_refusal_once_the_limit_is_seen_costs_no_statement(db, settings):
    token = _token_with_limit(2)
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    ratelimits.consume(token, now=now)
    ratelimits.consume(token, now=now)
    with CaptureQueriesContext(connection) as captured, pytest.raises(ratelimits.RateLimited):
        ratelimits.consume(token, now=now)
    assert len(captured) == 0
    assert RateLimitWindow.objects.get().count == 2


def test_a_raised_limit_takes_effect_within_the_window(db, settings):
    token = _token_with_limit(1)
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    ratelimits.consume(token, now=now)
    with pytest.raises(ratelimits.RateLimited):
        ratelimits.consume(token, now=now)
    token.rate_limit_per_minute = 3
    assert ratelimits.consume(token, now=now).used == 2


def _window(now: datetime) -> int:
    return int(now.timestamp()) // 60 * 60


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
    client, django_user_model, settings, one_window
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


def test_every_counted_answer_carries_the_rate_limit_fields(client, db, settings, one_window):
    # Given a limit of 3 per minute, counted request by request
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 3
    settings.AETNAWEB_API_RATE_LIMIT_BLOCK = 1
    secret = issue_token("acme:alice:*")
    # When the token makes three successful requests (a read, a write, a read)
    answers = [
        _get(client, secret),
        _remember(client, secret, "My car is red."),
        _get(client, secret),
    ]
    # Then each says the limit, what is left and when the window ends
    assert [a.status_code for a in answers] == [200, 201, 200]
    assert [a["RateLimit-Limit"] for a in answers] == ["3", "3", "3"]
    assert [a["RateLimit-Remaining"] for a in answers] == ["2", "1", "0"]
    for answer in answers:
        assert 1 <= int(answer["RateLimit-Reset"]) <= 60
    # And the refusal that follows carries them too, with Retry-After
    refused = _get(client, secret)
    assert refused.status_code == 429
    assert (refused["RateLimit-Limit"], refused["RateLimit-Remaining"]) == ("3", "0")
    assert refused["RateLimit-Reset"] == refused["Retry-After"]


def test_a_refused_answer_of_a_counted_request_carries_the_fields(client, db, settings, one_window):
    # Given a counted token and a request the API refuses (a bad body)
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 10
    settings.AETNAWEB_API_RATE_LIMIT_BLOCK = 1
    secret = issue_token("acme:alice:*")
    response = client.post(
        "/api/v1/memory/remember",
        data=json.dumps({"scope": S}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    # Then the 400 still tells the client its limit
    assert response.status_code == 400
    assert (response["RateLimit-Limit"], response["RateLimit-Remaining"]) == ("10", "9")


def test_an_idempotent_replay_carries_the_fields(client, db, settings, one_window):
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 5
    settings.AETNAWEB_API_RATE_LIMIT_BLOCK = 1
    secret = issue_token("acme:alice:*")
    headers = {"Authorization": f"Bearer {secret}", "Idempotency-Key": "k-fields"}
    body = json.dumps({"scope": S, "text": "My car is red."})
    answers = [
        client.post(
            "/api/v1/memory/remember", data=body, content_type="application/json", headers=headers
        )
        for _ in range(2)
    ]
    assert answers[1]["Idempotent-Replayed"] == "true"
    assert [a["RateLimit-Remaining"] for a in answers] == ["4", "3"]


def test_uncounted_answers_carry_no_fields(client, db, settings):
    # Given an unlimited token, and a request with a bad token
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 0
    secret = issue_token("acme:alice:*")
    unlimited = _get(client, secret)
    bad = _get(client, "aetna_x_y")
    # Then neither says anything about a limit (there is none to tell, or nobody was counted)
    assert unlimited.status_code == 200 and bad.status_code == 401
    for response in (unlimited, bad):
        assert not response.has_header("RateLimit-Limit")
        assert not response.has_header("RateLimit-Remaining")


def test_remaining_counts_blocks_reserved_here_as_still_available(db, settings, one_window):
    # Given a busy token counted in blocks (a block reserves several requests at once)
    settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE = 1000
    settings.AETNAWEB_API_RATE_LIMIT_BLOCK = 16
    issue_token("acme:alice:*")
    token = ApiToken.objects.get()
    # When it makes 40 requests in this process
    usages = [ratelimits.consume(token) for _ in range(40)]
    # Then Remaining goes down by one per request, whatever the database row says
    assert [u.remaining for u in usages] == list(range(999, 959, -1))
