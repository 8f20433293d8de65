"""Bad input never produces a 500 and never writes anything (row counts of every table)."""

from __future__ import annotations

import pytest
from django.apps import apps

from actions.models import ActionTransaction
from aetnaweb.access import SYSTEM
from aetnaweb.api import MAX_BODY_BYTES
from memory import services

SCOPE = "acme:alice:proj"
HUGE = "x" * (MAX_BODY_BYTES + 1)

BAD_REQUESTS: list[tuple[str, str, object]] = [
    # an invalid scope
    ("post", "/memory/remember", {"scope": "acme:alice", "text": "My pin is 1"}),
    ("post", "/memory/remember", {"scope": "platform:bob:*", "text": "My pin is 1"}),
    ("post", "/memory/capture", {"scope": "acme:*:x", "role": "user", "content": "My pin is 1"}),
    ("post", "/memory/recall", {"scope": "a:b:c:d", "query": "pin"}),
    ("post", "/memory/recall-block", {"scope": "ACME alice", "query": "pin"}),
    ("post", "/memory/persona", {"scope": ""}),
    ("post", "/memory/forget", {"scope": "acme:alice%:*", "selector": "pin"}),
    (
        "post",
        "/memory/propose",
        {"scope": "acme::*", "facts": [{"content": "x", "evidence": ["e"]}]},
    ),
    ("post", "/memory/log-action", {"scope": "*:*:*", "event_type": "agent.x", "payload": {}}),
    ("post", "/actions/stage", {"scope": "acme:alice", "operations": []}),
    ("get", "/memory/records", {"scope": "acme"}),
    ("get", "/memory/scenes", {"scope": "acme:alice:proj:x"}),
    ("get", "/actions/", {"scope": "acme:al ice:*"}),
    # a missing message or field
    ("post", "/memory/remember", {"scope": SCOPE}),
    ("post", "/memory/remember", {"scope": SCOPE, "text": "   "}),
    ("post", "/memory/capture", {"scope": SCOPE, "role": "user"}),
    ("post", "/memory/capture", {"scope": SCOPE, "role": "narrator", "content": "x"}),
    ("post", "/memory/recall", {"scope": SCOPE}),
    ("post", "/memory/log-action", {"scope": SCOPE, "event_type": "memory.forget", "payload": {}}),
    ("post", "/memory/propose", {"scope": SCOPE, "facts": []}),
    ("post", "/actions/stage", {"scope": SCOPE}),
    ("post", "/actions/stage", {"scope": SCOPE, "operations": [{"key": "k"}]}),
    # a body over 64 KiB
    ("post", "/memory/remember", {"scope": SCOPE, "text": HUGE}),
    ("post", "/actions/stage", {"scope": SCOPE, "operations": [], "pad": HUGE}),
    # an unknown record
    ("post", "/memory/forget", {"scope": SCOPE, "record_ids": ["mem_" + "0" * 32]}),
    ("post", "/memory/forget/preview", {"scope": SCOPE, "record_ids": ["mem_unknown"]}),
    ("get", "/memory/records/mem_unknown", None),
    ("get", "/actions/act_unknown", None),
    ("get", "/actions/act_unknown/verify", None),
    # wrong types everywhere
    ("post", "/memory/recall", {"scope": SCOPE, "query": ["pin"], "limit": "lots"}),
    ("post", "/memory/remember", {"scope": SCOPE, "text": {"nested": True}}),
    ("post", "/memory/forget", {"scope": SCOPE, "record_ids": "mem_1"}),
    ("post", "/memory/log-action", {"scope": SCOPE, "event_type": "agent.x", "payload": "{}"}),
    # NUL characters (PostgreSQL cannot store them; they are refused at the boundary)
    ("post", "/memory/remember", {"scope": SCOPE, "text": "My pet is fi\x00do"}),
    ("post", "/memory/remember", {"scope": SCOPE, "text": "My pet is x", "session_id": "s\x00"}),
    ("post", "/memory/forget", {"scope": SCOPE, "selector": "pe\x00t"}),
    ("post", "/memory/recall", {"scope": SCOPE, "query": "pe\x00t"}),
    (
        "post",
        "/memory/propose",
        {"scope": SCOPE, "facts": [{"content": "x\x00", "evidence": ["e"]}]},
    ),
    (
        "post",
        "/memory/log-action",
        {"scope": SCOPE, "event_type": "agent.x", "payload": {"\x00": 1}},
    ),
    ("get", "/memory/records", {"scope": SCOPE, "text": "a\x00b"}),
    ("get", "/memory/records/mem_\x00", None),
    ("get", "/actions/", {"after": "act_\x00"}),
    # outside the token's subtree
    ("post", "/memory/remember", {"scope": "acme:bob:*", "text": "My pin is 1"}),
    ("post", "/actions/stage", {"scope": "acmecorp:*:*", "operations": []}),
]

RAW_BODIES = [b"", b"{", b"null", b"[]", b'{"scope": NaN}', b"\x00\x01", b'{"a":' * 2000]


# Request bookkeeping, not data: a refused request still spends rate-limit budget.
BOOKKEEPING = {"access.RateLimitWindow"}


def row_counts() -> dict[str, int]:
    return {
        model._meta.label: model.objects.count()
        for model in apps.get_models()
        if model._meta.label not in BOOKKEEPING
    }


@pytest.fixture
def existing_data(actions_root):
    services.remember(principal=SYSTEM, scope=SCOPE, text="My pin is 2468")
    services.remember(principal=SYSTEM, scope="acme:bob:proj", text="My pin is 1357")


@pytest.mark.django_db
def test_no_bad_request_writes_anything_or_fails_the_server(alice_api, existing_data):
    before = row_counts()
    for method, path, body in BAD_REQUESTS:
        if method == "get":
            response = alice_api.get(path, body or {})
        else:
            response = alice_api.post(path, body)
        assert 400 <= response.status_code < 500, (path, body, response.content)
        assert set(response.data) == {"error", "field", "detail"}, (path, response.data)
    for raw in RAW_BODIES:
        for path in ("/memory/remember", "/memory/forget", "/actions/stage", "/memory/log-action"):
            response = alice_api.post(path, raw=raw)
            assert response.status_code == 400, (path, raw[:20], response.content)
    assert row_counts() == before
    assert not ActionTransaction.objects.exists()


@pytest.mark.django_db
def test_unauthenticated_requests_write_nothing(client, existing_data):
    from tests.api.conftest import ApiClient

    before = row_counts()
    anonymous = ApiClient(client, None)
    for method, path, body in BAD_REQUESTS[:5]:
        response = anonymous.get(path, body) if method == "get" else anonymous.post(path, body)
        assert response.status_code == 401
    good = {"scope": SCOPE, "text": "My pin is 1111"}
    assert anonymous.post("/memory/remember", good).status_code == 401
    assert anonymous.post("/memory/remember", good, secret="aetna_x_y").status_code == 401
    assert row_counts() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scope": SCOPE, "text": "My pet is fi\x00do"}, "text"),
        ({"scope": SCOPE, "text": "ok", "session_id": "s\x00"}, "session_id"),
        ({"scope": SCOPE, "key": "k", "value": ["\x00"]}, "value.0"),
    ],
)
def test_nul_characters_are_400_naming_the_field(alice_api, body, field):
    response = alice_api.post("/memory/remember", body)
    assert response.status_code == 400
    assert response.data["field"] == field
    assert "NUL" in response.data["detail"]
