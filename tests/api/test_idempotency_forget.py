"""A kept Idempotency-Key answer never outlives a forget of what it names (issue 29, item 3)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client

from access import idempotency
from access.models import IdempotencyKey
from aetnaweb.access import SYSTEM
from aetnaweb.purges import PurgedContent
from audit.models import AuditEvent
from memory import services
from memory.models import Episode, Record
from tests.api.conftest import issue_token

S = "acme:alice:proj"
SECRET_TEXT = "My locker combination is KIWIGRAPE42."


def _post(client: Client, secret: str, key: str, body: dict[str, Any], path: str = "remember"):
    return client.post(
        f"/api/v1/memory/{path}",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}", "Idempotency-Key": key},
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


def kept_bodies() -> bytes:
    return b"".join(bytes(row.response_body or b"") for row in IdempotencyKey.objects.all())


def test_a_replay_after_a_forget_is_410_and_holds_none_of_the_content(client, secret):
    # Given a remember sent with a key, its answer kept for replays
    body = {"scope": S, "text": SECRET_TEXT}
    first = _post(client, secret, "idem-kiwi-1", body)
    assert first.status_code == 201 and b"KIWIGRAPE42" in first.content
    record_id = first.json()["records"][0]["record_id"]
    # When the record is forgotten, then the same request is sent again
    receipt = services.forget(principal=SYSTEM, scope=S, record_ids=[record_id])
    records, events = Record.objects.count(), AuditEvent.objects.count()
    replay = _post(client, secret, "idem-kiwi-1", body)
    # Then the replay is a 410 naming the forgotten record, with no word of it
    assert replay.status_code == 410
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.json()["error"] == "idempotency_answer_forgotten"
    # (the answer named the record and the message it came from)
    assert replay.json()["forgotten_ids"] == [record_id, first.json()["episode_id"]]
    assert b"KIWIGRAPE42" not in replay.content and b"locker" not in replay.content
    # And the write was not run again: the forgotten words are not stored anew
    assert (Record.objects.count(), AuditEvent.objects.count()) == (records, events)
    assert b"KIWIGRAPE42" not in kept_bodies()
    assert receipt["purged_record_ids"] == [record_id]


def test_a_kept_recall_answer_is_rewritten_too(client, secret):
    # Given a recall with a key whose answer holds a candidate's content
    record_id = services.remember(principal=SYSTEM, scope=S, text=SECRET_TEXT).record_ids[0]
    body = {"scope": S, "query": "locker combination"}
    first = _post(client, secret, "recall-1", body, path="recall")
    assert first.status_code == 200 and b"KIWIGRAPE42" in first.content
    # When the record is forgotten by the user's words
    services.forget(principal=SYSTEM, scope=S, utterance="forget my locker combination")
    # Then the replay no longer carries the candidate
    replay = _post(client, secret, "recall-1", body, path="recall")
    assert replay.status_code == 410
    assert record_id in replay.json()["forgotten_ids"]
    assert b"KIWIGRAPE42" not in replay.content
    assert b"KIWIGRAPE42" not in kept_bodies()


def test_a_review_reject_rewrites_the_answer_that_stored_the_claim(client, secret):
    # Given a quarantined claim stored through the API with a key
    body = {"scope": S, "text": "<webpage>My locker combination is KIWIGRAPE42.</webpage>"}
    first = _post(client, secret, "web-1", body)
    record_id = first.json()["records"][0]["record_id"]
    assert first.json()["records"][0]["status"] == "quarantined"
    # When a reviewer rejects it
    services.reject(principal=SYSTEM, scope=S, record_id=record_id)
    # Then its kept answer is gone too
    replay = _post(client, secret, "web-1", body)
    assert replay.status_code == 410
    assert b"KIWIGRAPE42" not in kept_bodies()


def test_answers_that_name_nothing_forgotten_still_replay_as_they_were(client, secret):
    # Given two remembers with keys, only the first one forgotten
    kept = _post(client, secret, "keep-1", {"scope": S, "text": "My car is red."})
    gone = _post(client, secret, "gone-1", {"scope": S, "text": SECRET_TEXT})
    services.forget(principal=SYSTEM, scope=S, record_ids=[gone.json()["records"][0]["record_id"]])
    # When the untouched one is retried
    replay = _post(client, secret, "keep-1", {"scope": S, "text": "My car is red."})
    # Then it is the first answer, byte for byte
    assert (replay.status_code, replay.content) == (201, kept.content)


def test_a_rewritten_key_still_refuses_another_request(client, secret):
    # Given a key whose answer was rewritten by a forget
    first = _post(client, secret, "k-9", {"scope": S, "text": SECRET_TEXT})
    services.forget(principal=SYSTEM, scope=S, record_ids=[first.json()["records"][0]["record_id"]])
    # When the same key comes with another body, then it is still the reuse refusal
    other = _post(client, secret, "k-9", {"scope": S, "text": "My car is blue."})
    assert other.status_code == 422
    assert other.json()["error"] == "idempotency_key_reused"


def test_forgetting_an_ignored_message_rewrites_the_answer_naming_its_episode(client, secret):
    # Given a statement the extractor ignores (no record), sent with a key
    body = {"scope": S, "text": "The wifi password at the office is tulip-42."}
    first = _post(client, secret, "wifi-1", body)
    assert first.status_code == 200 and first.json()["records"] == []
    episode_id = first.json()["episode_id"]
    # When its message is forgotten by the user's words
    receipt = services.forget(principal=SYSTEM, scope=S, utterance="forget the wifi password")
    # Then the episode was purged and the kept answer naming it says so
    assert receipt["purged_episode_ids"] == [episode_id]
    replay = _post(client, secret, "wifi-1", body)
    assert replay.status_code == 410
    assert replay.json()["forgotten_ids"] == [episode_id]


def test_a_store_that_cannot_be_rewritten_rolls_the_forget_back(client, secret, monkeypatch):
    # Given a kept answer, and a rewrite that fails half-way
    first = _post(client, secret, "k-10", {"scope": S, "text": SECRET_TEXT})
    record_id = first.json()["records"][0]["record_id"]
    events = AuditEvent.objects.count()

    def fail(**kwargs: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(idempotency, "_forgotten_answer", lambda ids: fail())
    # When the record is forgotten
    with pytest.raises(RuntimeError):
        services.forget(principal=SYSTEM, scope=S, record_ids=[record_id])
    # Then nothing was purged: no receipt claims content is gone while a copy stays
    record = Record.objects.get(record_id=record_id)
    assert record.status == "active" and "KIWIGRAPE42" in record.content
    assert Episode.objects.get(episode_id=record.episode_id).text == SECRET_TEXT
    assert AuditEvent.objects.count() == events
    assert b"KIWIGRAPE42" in kept_bodies()


def test_an_answer_in_flight_while_a_forget_commits_is_kept_as_forgotten(
    client, secret, monkeypatch
):
    # Given a remember whose answer is computed, and a forget of its record that
    # commits before the middleware keeps that answer (the race, made deterministic)
    keep = idempotency._keep

    def forget_first(token, key, response) -> None:
        record_id = json.loads(response.content)["records"][0]["record_id"]
        services.forget(principal=SYSTEM, scope=S, record_ids=[record_id])
        keep(token, key, response)

    monkeypatch.setattr(idempotency, "_keep", forget_first)
    body = {"scope": S, "text": SECRET_TEXT}
    first = _post(client, secret, "race-1", body)
    assert first.status_code == 201
    monkeypatch.setattr(idempotency, "_keep", keep)
    # When the request is retried
    replay = _post(client, secret, "race-1", body)
    # Then the kept answer is the forgotten one: the content never reached the table
    assert replay.status_code == 410
    assert replay.json()["forgotten_ids"] == sorted(
        [first.json()["records"][0]["record_id"], first.json()["episode_id"]]
    )
    assert b"KIWIGRAPE42" not in kept_bodies()


def test_a_replayed_forget_still_returns_its_receipt(client, secret):
    # Given a forget sent with a key (its receipt names what it purged, no content)
    record_id = services.remember(principal=SYSTEM, scope=S, text=SECRET_TEXT).record_ids[0]
    body = {"scope": S, "record_ids": [record_id]}
    first = _post(client, secret, "forget-1", body, path="forget")
    assert first.status_code == 200
    # When it is retried, then the receipt comes back as first given
    replay = _post(client, secret, "forget-1", body, path="forget")
    assert (replay.status_code, replay.content) == (200, first.content)


def test_a_later_forget_of_the_same_message_leaves_an_earlier_receipt_alone(client, secret):
    # Given one message with two facts, and a keyed forget of the first fact
    said = services.remember(principal=SYSTEM, scope=S, text="My car is red. My cat is Tom.")
    assert len(said.record_ids) == 2
    first_body = {"scope": S, "record_ids": [said.record_ids[0]]}
    first = _post(client, secret, "forget-a", first_body, path="forget")
    assert first.json()["purged_episode_ids"] == [said.episode_id]
    # When the second fact is forgotten (its message is named again)
    services.forget(principal=SYSTEM, scope=S, record_ids=[said.record_ids[1]])
    # Then the first forget's kept receipt still replays as it was
    replay = _post(client, secret, "forget-a", first_body, path="forget")
    assert (replay.status_code, replay.content) == (200, first.content)


def test_a_purge_of_many_ids_finds_an_answer_naming_any_one_of_them(client, secret):
    # Given a kept answer, and a purge naming more IDs than one search statement holds
    first = _post(client, secret, "many-1", {"scope": S, "text": SECRET_TEXT})
    record_id = first.json()["records"][0]["record_id"]
    others = tuple(f"mem_{n:032x}" for n in range(idempotency.IDS_PER_SEARCH * 2))
    ids = (*others[: idempotency.IDS_PER_SEARCH + 5], record_id, *others[-5:])
    # When the kept answers are searched for them
    with transaction.atomic():
        rewritten = idempotency.forget_kept_answers(PurgedContent(S, ids, ()))
    # Then the one answer naming one of them is rewritten, naming just that ID
    assert rewritten == 1
    replay = _post(client, secret, "many-1", {"scope": S, "text": SECRET_TEXT})
    assert (replay.status_code, replay.json()["forgotten_ids"]) == (410, [record_id])


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_keyed_writes_racing_forgets_never_keep_forgotten_content():
    # Given facts that keyed recalls and remembers name, while forgets purge them
    secret = issue_token("acme:alice:*")
    tokens = [f"zqrace{n}zq" for n in range(6)]
    for token in tokens:
        services.remember(principal=SYSTEM, scope=S, text=f"My locker {token} code is {token}.")
    errors: list[BaseException] = []
    statuses: list[int] = []
    start = threading.Barrier(3)

    def keyed(kind: str) -> None:
        try:
            start.wait()
            for n, token in enumerate(tokens):
                body = (
                    {"scope": S, "query": f"locker {token}"}
                    if kind == "recall"
                    else {"scope": S, "text": f"My gym locker {token} code is {token}."}
                )
                response = _post(Client(), secret, f"{kind}-{n}", body, path=kind)
                statuses.append(response.status_code)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    def forgetting() -> None:
        try:
            start.wait()
            for token in tokens:
                services.forget(principal=SYSTEM, scope=S, selector=token)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=keyed, args=(kind,)) for kind in ("recall", "remember")]
    threads.append(threading.Thread(target=forgetting))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    # Then nothing failed, and no kept answer holds a value whose records are all forgotten
    assert errors == [] and all(status < 500 for status in statuses), (errors, statuses)
    kept = kept_bodies()
    for token in tokens:
        if not Record.objects.filter(content__contains=token).exists():
            assert token.encode() not in kept, token
