"""Idempotency-Key on API writes (access/idempotency.py): replay, refusal, expiry, races."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from access.models import IdempotencyKey
from audit.models import AuditEvent
from memory import services
from memory.models import Record
from tests.api.conftest import issue_token

S = "acme:alice:proj"


def _post(
    client: Client, secret: str, key: str | None, body: dict[str, Any], path: str = "remember"
):
    headers = {"Authorization": f"Bearer {secret}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post(
        f"/api/v1/memory/{path}",
        data=json.dumps(body),
        content_type="application/json",
        headers=headers,
    )


@pytest.fixture
def clean_index(transactional_db):
    """Transactional tests commit rows; Django's flush empties model tables only."""
    yield
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_record_fts")


@pytest.fixture
def secret(db) -> str:
    return issue_token("acme:alice:*")


def test_a_retried_write_returns_the_first_answer_and_stores_nothing_twice(client, secret):
    # Given a remember sent with a key
    body = {"scope": S, "text": "My backup email is a@example.com."}
    first = _post(client, secret, "k-1", body)
    assert first.status_code == 201
    records, events = Record.objects.count(), AuditEvent.objects.count()
    # When the client retries it with the same key
    second = _post(client, secret, "k-1", body)
    # Then it gets the same status and body, marked as a replay, and nothing new is stored
    assert second.status_code == 201
    assert second.content == first.content
    assert second["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert (Record.objects.count(), AuditEvent.objects.count()) == (records, events)


def test_without_a_key_a_retry_writes_again(client, secret):
    # Given no key, when the same message is sent twice, then two episodes are stored
    body = {"scope": S, "text": "I like tea.", "force": True}
    assert _post(client, secret, None, body).status_code == 201
    events = AuditEvent.objects.count()
    assert _post(client, secret, None, body).status_code == 200
    assert AuditEvent.objects.count() > events
    assert IdempotencyKey.objects.count() == 0


def test_the_same_key_with_a_different_body_is_422_and_writes_nothing(client, secret):
    # Given a key already used for one message
    _post(client, secret, "k-2", {"scope": S, "text": "My car is red."})
    records, events = Record.objects.count(), AuditEvent.objects.count()
    # When it comes back with another body
    response = _post(client, secret, "k-2", {"scope": S, "text": "My car is blue."})
    # Then 422 names the header and nothing is written
    assert response.status_code == 422
    assert response.json()["error"] == "idempotency_key_reused"
    assert response.json()["field"] == "Idempotency-Key"
    assert (Record.objects.count(), AuditEvent.objects.count()) == (records, events)


def _post_raw(client: Client, secret: str, key: str, raw: str):
    return client.post(
        "/api/v1/memory/remember",
        data=raw,
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}", "Idempotency-Key": key},
    )


def test_the_same_json_spelled_otherwise_is_a_replay(client, secret):
    # Given a write sent compactly, with a key
    first = _post_raw(
        client, secret, "k-json", '{"scope":"acme:alice:proj","text":"My car is red."}'
    )
    assert first.status_code == 201
    records, events = Record.objects.count(), AuditEvent.objects.count()
    # When the retry re-serialises it: other whitespace, other key order, an escaped letter
    retry = _post_raw(
        client,
        secret,
        "k-json",
        '{\n  "text": "My c\\u0061r is red.",\n  "scope": "acme:alice:proj"\n}\n',
    )
    # Then it is the same request: the first answer, replayed, and nothing stored twice
    assert retry.status_code == 201
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.content == first.content
    assert (Record.objects.count(), AuditEvent.objects.count()) == (records, events)


@pytest.mark.parametrize(
    "other",
    [
        '{"scope": "acme:alice:proj", "text": "My car is red!"}',  # another string
        '{"scope": "acme:alice:proj", "text": "My car is red.", "force": false}',  # a field more
        '{"scope": "acme:alice:proj", "text": "My car is red.", "metadata": {"n": 1.0}}',
    ],
)
def test_a_different_json_value_under_the_same_key_is_still_422(client, secret, other):
    # Given a key used for one JSON value
    first = _post_raw(
        client,
        secret,
        "k-value",
        '{"scope": "acme:alice:proj", "text": "My car is red.", "metadata": {"n": 1}}'
        if "metadata" in other
        else '{"scope": "acme:alice:proj", "text": "My car is red."}',
    )
    assert first.status_code == 201
    records, events = Record.objects.count(), AuditEvent.objects.count()
    # When the same key comes with a different value (even 1.0 for 1: a different spelling
    # of a number may mean another type to the server)
    response = _post_raw(client, secret, "k-value", other)
    # Then 422, and nothing written
    assert response.status_code == 422
    assert response.json()["error"] == "idempotency_key_reused"
    assert (Record.objects.count(), AuditEvent.objects.count()) == (records, events)


def test_the_same_key_on_another_path_is_422(client, secret):
    body = {"scope": S, "query": "car"}
    assert _post(client, secret, "k-3", body, path="recall").status_code == 200
    response = _post(client, secret, "k-3", body, path="recall-block")
    assert response.status_code == 422


def test_keys_belong_to_their_token(client, secret):
    # Given another token using the same key string
    other = issue_token("acme:alice:*", name="other-agent")
    _post(client, secret, "shared", {"scope": S, "text": "My cat is Tom."})
    # When the other token sends a different body under that key
    response = _post(client, other, "shared", {"scope": S, "text": "My dog is Rex."})
    # Then it is its own key: executed, not refused or replayed
    assert response.status_code == 201
    assert "Idempotent-Replayed" not in response
    assert IdempotencyKey.objects.count() == 2


def test_a_refusal_is_replayed_too(client, secret):
    # Given a bad request (a scope outside the token) sent with a key
    body = {"scope": "acme:bob:proj", "text": "hello there"}
    first = _post(client, secret, "k-4", body)
    assert first.status_code == 404
    # Then its retry gets the same refusal
    second = _post(client, secret, "k-4", body)
    assert (second.status_code, second.content) == (404, first.content)


@pytest.mark.parametrize("key", ["", "a b", "x" * 256, "caf\u00e9", "nul\x00"])
def test_a_malformed_key_is_400_and_writes_nothing(client, secret, key):
    records = Record.objects.count()
    headers = {"Authorization": f"Bearer {secret}", "Idempotency-Key": key}
    try:
        response = client.post(
            "/api/v1/memory/remember",
            data=json.dumps({"scope": S, "text": "My car is red."}),
            content_type="application/json",
            headers=headers,
        )
    except ValueError:  # the test client itself refuses a header with NUL
        return
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_idempotency_key"
    assert Record.objects.count() == records
    assert IdempotencyKey.objects.count() == 0


def test_a_bad_token_with_a_key_is_401_and_keeps_nothing(client, db):
    response = _post(client, "aetna_nope", "k-5", {"scope": S, "text": "x"})
    assert response.status_code == 401
    assert IdempotencyKey.objects.count() == 0


def test_an_expired_key_runs_again(client, secret, settings):
    # Given a key whose first answer has expired
    body = {"scope": S, "text": "My phone is 555-0100.", "force": True}
    _post(client, secret, "k-6", body)
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    events = AuditEvent.objects.count()
    # When it is used again, then the write runs again (a new answer is kept)
    response = _post(client, secret, "k-6", body)
    assert response.status_code == 200
    assert "Idempotent-Replayed" not in response
    assert AuditEvent.objects.count() > events
    assert IdempotencyKey.objects.get().expires_at > timezone.now()


def test_the_ttl_comes_from_settings(client, secret, settings):
    settings.AETNAWEB_IDEMPOTENCY_TTL_SECONDS = 60
    _post(client, secret, "k-7", {"scope": S, "text": "My car is red."})
    row = IdempotencyKey.objects.get()
    assert timedelta(seconds=59) < row.expires_at - row.created_at <= timedelta(seconds=60)


def test_a_server_error_is_not_kept_so_a_retry_executes(client, secret, monkeypatch):
    # Given a remember that fails with a bug the first time
    real = services.remember
    calls = {"n": 0}

    def flaky(**kwargs: Any):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return real(**kwargs)

    monkeypatch.setattr(services, "remember", flaky)
    body = {"scope": S, "text": "My car is red."}
    assert _post(client, secret, "k-8", body).status_code == 500
    assert IdempotencyKey.objects.count() == 0
    # When retried with the same key, then it runs
    assert _post(client, secret, "k-8", body).status_code == 201
    assert calls["n"] == 2


def test_reads_and_other_paths_ignore_the_header(client, secret):
    response = client.get(
        "/api/v1/memory/records",
        {"scope": S},
        headers={"Authorization": f"Bearer {secret}", "Idempotency-Key": "k-9"},
    )
    assert response.status_code == 200
    assert IdempotencyKey.objects.count() == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_a_duplicate_while_the_first_is_in_flight_gets_409_then_the_replay(monkeypatch):
    # Given a first request held inside the service (its own thread and connection)
    secret = issue_token("acme:alice:*")
    started, release = threading.Event(), threading.Event()
    real = services.remember

    def slow(**kwargs: Any):
        started.set()
        release.wait(timeout=30)
        return real(**kwargs)

    monkeypatch.setattr(services, "remember", slow)
    body = {"scope": S, "text": "My car is red."}
    results: dict[str, Any] = {}

    def first() -> None:
        try:
            results["first"] = _post(Client(), secret, "race", body)
        finally:
            connection.close()

    thread = threading.Thread(target=first)
    thread.start()
    assert started.wait(timeout=30)
    # When a duplicate arrives on another connection while the first runs
    duplicate = _post(Client(), secret, "race", body)
    # Then it is refused as in flight, with Retry-After, and does not execute
    assert duplicate.status_code == 409
    assert duplicate.json()["error"] == "idempotency_key_in_flight"
    assert duplicate["Retry-After"] == "1"
    release.set()
    thread.join(timeout=60)
    assert results["first"].status_code == 201
    # And a later retry gets the first answer
    replay = _post(Client(), secret, "race", body)
    assert replay.content == results["first"].content
    assert Record.objects.filter(content__icontains="car").count() == 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_racing_duplicates_execute_exactly_once():
    # Given several clients on separate connections sending one key at once
    secret = issue_token("acme:alice:*")
    racers = 4
    barrier = threading.Barrier(racers)
    statuses: list[int] = []
    executed: list[int] = []
    errors: list[BaseException] = []

    def racer() -> None:
        try:
            barrier.wait()
            response = _post(Client(), secret, "burst", {"scope": S, "text": "My car is green."})
            statuses.append(response.status_code)
            if response.status_code == 201 and not response.has_header("Idempotent-Replayed"):
                executed.append(response.status_code)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=racer) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    # Then the write ran once: one record, and every answer is the result or "in flight"
    assert errors == []
    assert set(statuses) <= {201, 409} and 201 in statuses
    assert executed == [201]
    assert Record.objects.filter(content__icontains="green").count() == 1
    assert IdempotencyKey.objects.count() == 1
