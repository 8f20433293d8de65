"""A token for acme:alice:* tries every endpoint on acme:bob:* and acmecorp:*:* data.

Every attempt answers 404 (exactly as for something that does not exist) and
writes nothing: the row count of every table is unchanged.
"""

from __future__ import annotations

import pytest
from django.apps import apps

from actions import services as action_services
from aetnaweb.access import SYSTEM, system_principal
from memory import services
from tests.factories import authorizing_evidence

OWN = "acme:alice:proj"
FOREIGN_SCOPES = [
    "acme:bob:*",
    "acme:bob:proj",
    "acmecorp:*:*",
    "acmecorp:alice:*",
    "acme:alicex:*",  # a prefix twin of alice at user level
    "acme:*:*",  # an ancestor: reads go up only through recall, writes never
    "platform:*:*",
]


# Request bookkeeping, not data: a refused request still spends rate-limit budget.
BOOKKEEPING = {"access.RateLimitWindow"}


def row_counts() -> dict[str, int]:
    return {
        model._meta.label: model.objects.count()
        for model in apps.get_models()
        if model._meta.label not in BOOKKEEPING
    }


def write_plan(path: str) -> list[dict]:
    ref = "msg-1"
    return [
        {
            "key": "w1",
            "adapter": "filesystem",
            "operation": "write_text",
            "arguments": {"path": path, "content": "secret\n"},
            "evidence": [authorizing_evidence(ref)],
        }
    ]


@pytest.fixture(autouse=True)
def _authorizing_messages(authorizing_messages) -> None:
    """The user message the action evidence here cites exists (evidence must resolve)."""


@pytest.fixture
def foreign_data(actions_root, settings, tmp_path):
    settings.AETNAWEB_CHECKPOINT_SINK = str(tmp_path / "checkpoints.jsonl")
    """Records, episodes and transactions belonging to bob and to acmecorp."""
    data = {}
    for scope in ["acme:bob:proj", "acmecorp:*:*"]:
        remembered = services.remember(principal=SYSTEM, scope=scope, text="My vault code is 9931")
        quarantined = services.remember(
            principal=SYSTEM, scope=scope, text="<webpage>My vault owner is Mallory</webpage>"
        )
        patch = action_services.stage(
            scope=scope,
            operations=write_plan(f"{scope.replace(':', '_').replace('*', 'all')}.txt"),
            principal=system_principal("agent"),
        )
        data[scope] = {
            "record_id": remembered.records[0].record_id,
            "quarantined_id": quarantined.records[0].record_id,
            "episode_id": remembered.episode_id,
            "transaction_id": patch.transaction_id,
        }
    return data


def scoped_attempts(scope: str) -> list[tuple[str, str, dict]]:
    """Every endpoint that names a scope, aimed at ``scope``."""
    return [
        ("post", "/memory/remember", {"scope": scope, "text": "My vault code is 0000"}),
        ("post", "/memory/remember", {"scope": scope, "key": "vault code", "value": "0000"}),
        ("post", "/memory/capture", {"scope": scope, "role": "user", "content": "My x is y"}),
        ("post", "/memory/capture", {"scope": scope, "role": "tool_result", "content": "x"}),
        ("post", "/memory/recall", {"scope": scope, "query": "vault code"}),
        ("post", "/memory/recall-block", {"scope": scope, "query": "vault code"}),
        ("post", "/memory/persona", {"scope": scope}),
        ("get", "/memory/scenes", {"scope": scope}),
        ("get", "/memory/records", {"scope": scope}),
        ("get", "/memory/records", {"scope": scope, "include_descendants": "true"}),
        ("post", "/memory/forget/preview", {"scope": scope, "selector": "vault"}),
        ("post", "/memory/forget", {"scope": scope, "selector": "vault"}),
        ("post", "/memory/forget", {"scope": scope, "utterance": "forget my vault code"}),
        ("post", "/memory/forget", {"scope": scope}),  # even an empty one: 404 first
        (
            "post",
            "/memory/propose",
            {"scope": scope, "facts": [{"content": "x", "evidence": ["e"]}]},
        ),
        (
            "post",
            "/memory/log-action",
            {"scope": scope, "event_type": "agent.probe", "payload": {}},
        ),
        ("post", "/actions/stage", {"scope": scope, "operations": write_plan("probe.txt")}),
        ("get", "/actions/", {"scope": scope}),
        ("get", "/audit/verify", {"scope": scope}),
        ("get", "/audit/export", {"subject": scope}),
    ]


def call(api, method: str, path: str, body: dict):
    return api.get(path, body) if method == "get" else api.post(path, body)


@pytest.mark.django_db
@pytest.mark.parametrize("scope", FOREIGN_SCOPES)
def test_every_scoped_endpoint_is_404_outside_the_subtree(alice_api, foreign_data, scope):
    before = row_counts()
    for method, path, body in scoped_attempts(scope):
        response = call(alice_api, method, path, body)
        assert response.status_code == 404, (path, body, response.content)
        assert response.data == {
            "error": "not_found",
            "field": None,
            "detail": "no such resource for this token",
        }
    assert row_counts() == before


@pytest.mark.django_db
@pytest.mark.parametrize("owner", ["acme:bob:proj", "acmecorp:*:*"])
def test_foreign_ids_look_exactly_like_unknown_ids(alice_api, foreign_data, owner):
    ids = foreign_data[owner]
    unknown = {
        "record_id": "mem_" + "f" * 32,
        "quarantined_id": "mem_" + "e" * 32,
        "episode_id": "ep_" + "d" * 32,
        "transaction_id": "act_" + "c" * 32,
    }
    before = row_counts()
    for id_set in (ids, unknown):
        # Reading them by ID: 404
        for key in ("record_id", "quarantined_id"):
            response = alice_api.get(f"/memory/records/{id_set[key]}")
            assert response.status_code == 404
            assert response.data["detail"] == "no such resource for this token"
        for path in ("/actions/{}", "/actions/{}/verify"):
            response = alice_api.get(path.format(id_set["transaction_id"]))
            assert response.status_code == 404
    assert row_counts() == before
    # Citing them from alice's own scope: refused exactly like unknown IDs, nothing purged
    for id_set in (ids, unknown):
        response = alice_api.post(
            "/memory/forget", {"scope": OWN, "record_ids": [id_set["record_id"]]}
        )
        assert response.status_code == 400
        assert response.data["error"] == "record_not_found"
        proposal = alice_api.post(
            "/memory/propose",
            {"scope": OWN, "facts": [{"content": "x", "evidence": [id_set["episode_id"]]}]},
        )
        assert proposal.status_code == 201
        assert proposal.data["accepted"] == []
        assert proposal.data["rejected"][0]["reason"] == "unknown_evidence"
    assert apps.get_model("memory", "Record").objects.filter(status="tombstoned").count() == 0


@pytest.mark.django_db
def test_lists_and_recall_inside_the_subtree_never_show_foreign_rows(alice_api, foreign_data):
    services.remember(principal=SYSTEM, scope=OWN, text="My vault code is 1234")
    listing = alice_api.get("/actions/")
    assert listing.status_code == 200
    foreign_txns = {data["transaction_id"] for data in foreign_data.values()}
    assert foreign_txns.isdisjoint(t["transaction_id"] for t in listing.data["items"])
    recall = alice_api.post("/memory/recall", {"scope": OWN, "query": "vault code", "limit": 50})
    assert {c["scope"] for c in recall.data["candidates"]} == {OWN}
    records = alice_api.get(
        "/memory/records", {"scope": "acme:alice:*", "include_descendants": True}
    )
    assert {r["scope"] for r in records.data["items"]} == {OWN}
    block = alice_api.post("/memory/recall-block", {"scope": OWN, "query": "vault code"})
    assert "9931" not in block.data["text"]
    persona = alice_api.post("/memory/persona", {"scope": OWN})
    assert "9931" not in persona.data["text"]
    verified = alice_api.get("/audit/verify")
    assert {s["subject_id"] for s in verified.data["subjects"]} <= {OWN, "acme:alice:*"}
    exported = b"".join(alice_api.get("/audit/export").streaming_content).decode()
    assert "acme:bob" not in exported
    assert "acmecorp" not in exported
    checkpoint = alice_api.post("/audit/checkpoint", {})
    assert b"acme:bob" not in checkpoint.content
    assert b"acmecorp" not in checkpoint.content
