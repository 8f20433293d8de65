"""Kept Idempotency-Key answers are found by the IDs they name, through an index (issue 29 rest C).

Before: a purge searched the bytes of every kept answer for the purged IDs
(50,000 kept answers: a scan of the whole table on every forget). Now each
kept answer is indexed by the record and episode IDs it names when it is
kept (``access.models.KeptAnswerName``); a purge looks its IDs up there.
"""

from __future__ import annotations

import importlib
import json
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from access import idempotency, tokens
from access.models import IdempotencyKey, KeptAnswerName
from aetnaweb.access import SYSTEM
from aetnaweb.purges import PurgedContent
from memory import services
from tests.api.conftest import issue_token

pytestmark = pytest.mark.django_db

S = "acme:alice:proj"
backfill = importlib.import_module("access.migrations.0003_kept_answer_names")


def post(client, secret: str, key: str, body: dict, path: str = "remember"):
    return client.post(
        f"/api/v1/memory/{path}",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}", "Idempotency-Key": key},
    )


def names_of(key: str) -> set[str]:
    answer = IdempotencyKey.objects.get(key=key)
    return set(KeptAnswerName.objects.filter(answer=answer).values_list("name", flat=True))


def test_a_kept_answer_is_indexed_by_the_ids_it_names(client):
    # Given a remember sent with a key
    secret = issue_token("acme:alice:*")
    first = post(client, secret, "k-1", {"scope": S, "text": "My car is red. My cat is Tom."})
    assert first.status_code == 201
    said = first.json()
    # Then its kept answer is indexed by each record and the episode it names
    expected = {r["record_id"] for r in said["records"]} | {said["episode_id"]}
    assert len(expected) == 3 and names_of("k-1") == expected


def test_a_purge_reads_only_the_answers_naming_what_it_purged(client):
    # Given many kept answers, none naming the IDs a purge is about to remove
    secret = issue_token("acme:alice:*")
    for n in range(30):
        response = post(client, secret, f"k-{n}", {"scope": S, "text": f"My pin {n} is {n}."})
        assert response.status_code == 201
    ids = tuple(f"mem_{n:032x}" for n in range(3))
    # When the kept answers are searched for them
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        rewritten = idempotency.forget_kept_answers(PurgedContent(S, ids, ()))
    # Then nothing is rewritten, and no statement reads an answer's bytes
    assert rewritten == 0
    bodies = [q["sql"] for q in queries.captured_queries if "response_body" in q["sql"]]
    lookups = [q["sql"] for q in queries.captured_queries if "keptanswername" in q["sql"]]
    assert len(lookups) == 1 and all("WHERE" in sql and '"id" IN' in sql for sql in bodies)


def test_a_rewritten_answer_is_not_rewritten_again_by_a_later_purge(client):
    # Given one message with two facts, its keyed answer rewritten by a forget of the first
    secret = issue_token("acme:alice:*")
    body = {"scope": S, "text": "My car is red. My cat is Tom."}
    said = post(client, secret, "two-1", body).json()
    first, second = (r["record_id"] for r in said["records"])
    services.forget(principal=SYSTEM, scope=S, record_ids=[first])
    gone = post(client, secret, "two-1", body)
    assert gone.status_code == 410
    assert set(gone.json()["forgotten_ids"]) == {first, said["episode_id"]}
    # Its index now names only what the rewritten answer names
    assert names_of("two-1") == {first, said["episode_id"]}
    # When the second fact is forgotten too
    services.forget(principal=SYSTEM, scope=S, record_ids=[second])
    # Then the answer still says what it said (its forgotten IDs are not emptied)
    again = post(client, secret, "two-1", body)
    assert (again.status_code, again.content) == (410, gone.content)


def test_answers_kept_before_the_index_are_indexed_by_the_migration(client):
    # Given an answer kept before the index existed (a row with no names)
    secret = issue_token("acme:alice:*")
    stored = services.remember(principal=SYSTEM, scope=S, text="My locker code is KIWI42.")
    record_id = stored.record_ids[0]
    token = tokens.authenticate(secret)
    now = timezone.now()
    answer = IdempotencyKey.objects.create(
        token=token,
        key="old-1",
        request_digest="0" * 64,
        created_at=now,
        expires_at=now + timedelta(days=1),
        response_status=201,
        response_content_type="application/json",
        response_body=json.dumps(
            {"records": [{"record_id": record_id, "content": "User's locker code is KIWI42."}]}
        ).encode(),
    )
    assert not KeptAnswerName.objects.filter(answer=answer).exists()
    # When the migration's backfill runs
    backfill.index_kept_answers(django_apps, SimpleNamespace(connection=connection))
    assert names_of("old-1") == {record_id}
    # Then a forget of the record rewrites that answer: no byte of the content is kept
    services.forget(principal=SYSTEM, scope=S, record_ids=[record_id])
    answer.refresh_from_db()
    assert answer.response_status == 410 and b"KIWI42" not in bytes(answer.response_body)
