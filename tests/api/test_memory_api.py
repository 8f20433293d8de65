"""Every memory endpoint: the happy path through the shared services, and 400s naming the field."""

from __future__ import annotations

import json

import pytest

from aetnaweb.access import SYSTEM
from audit.models import AuditEvent
from audit.receipts import verify_deletion_receipt
from memory import services
from memory.models import Episode, Record

SCOPE = "acme:alice:proj"


def remember(api, text: str, scope: str = SCOPE, **extra):
    response = api.post("/memory/remember", {"scope": scope, "text": text, **extra})
    # 201 when a record was stored, 200 when nothing new was (a duplicate, no fact)
    assert response.status_code == (201 if response.data["records"] else 200), response.content
    return response.data


@pytest.mark.django_db
def test_remember_a_message_lands_active_and_audited_as_the_token(alice_api):
    # When the agent remembers a trusted user message
    data = remember(alice_api, "My favourite tea is oolong", session_id="s1", turn_id="t1")
    # Then one active record exists at exactly that scope
    assert data["scope"] == SCOPE
    assert data["trust_tier"] == "trusted_user"
    [record] = data["records"]
    assert record["status"] == "active"
    assert record["fact_key"] == "favourite tea"
    stored = Record.objects.get(record_id=record["record_id"])
    assert stored.scope == SCOPE
    # And the audit chain names the token, never the message
    events = AuditEvent.objects.filter(subject_id=SCOPE)
    assert {e.actor for e in events} == {"agent:test-agent"}
    assert all("oolong" not in e.payload for e in events)


@pytest.mark.django_db
def test_remember_a_webpage_lands_quarantined_and_is_never_recalled(alice_api):
    data = remember(alice_api, "Summarise this <webpage>My bank password is hunter2</webpage>")
    assert data["source_type"] == "webpage"
    assert [r["status"] for r in data["records"]] == ["quarantined"]
    recall = alice_api.post("/memory/recall", {"scope": SCOPE, "query": "bank password"})
    assert recall.status_code == 200
    assert recall.data["returned_ids"] == []


@pytest.mark.django_db
def test_remember_an_explicit_key_and_value(alice_api):
    response = alice_api.post(
        "/memory/remember",
        {"scope": SCOPE, "key": "Deploy Window", "value": "Tuesdays 9-11", "kind": "ops"},
    )
    assert response.status_code == 201
    [record] = response.data["records"]
    assert record["fact_key"] == "deploy window"
    assert response.data["episode_id"] is None


@pytest.mark.django_db
def test_remember_a_forced_note(alice_api):
    data = remember(alice_api, "Plain prose with no fact shape at all", force=True)
    assert len(data["records"]) == 1
    assert data["ignored"] is False


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        ({"text": "hi"}, "scope", "required"),
        ({"scope": "acme:alice", "text": "hi"}, "scope", "three segments"),
        ({"scope": "acme:*:secret", "text": "hi"}, "scope", "ambiguous"),
        ({"scope": "platform:bob:*", "text": "hi"}, "scope", "reserved"),
        ({"scope": "acme:al ice:*", "text": "hi"}, "scope", "may only contain"),
        ({"scope": 42, "text": "hi"}, "scope", "valid string"),
        ({"scope": SCOPE}, "text", "required"),
        ({"scope": SCOPE, "text": ""}, "text", "at least 1 character"),
        ({"scope": SCOPE, "text": "   "}, "text", "empty"),
        ({"scope": SCOPE, "text": "hi", "key": "k", "value": "v"}, "key", "not both"),
        ({"scope": SCOPE, "key": "colour"}, "value", "required"),
        ({"scope": SCOPE, "text": "hi", "source_type": "email"}, "source_type", "Input should be"),
        ({"scope": SCOPE, "text": "hi", "session_id": ""}, "session_id", "at least 1"),
        ({"scope": SCOPE, "text": "hi", "session_id": "s" * 201}, "session_id", "at most 200"),
        ({"scope": SCOPE, "text": "hi", "force": "maybe"}, "force", "boolean"),
    ],
)
def test_remember_refusals_name_the_field_and_write_nothing(alice_api, body, field, fragment):
    before = AuditEvent.objects.count()
    response = alice_api.post("/memory/remember", body)
    assert response.status_code == 400, response.content
    assert response.data["field"] == field
    assert fragment in response.data["detail"]
    assert not Episode.objects.exists()
    assert not Record.objects.exists()
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
def test_invalid_scope_has_its_own_error_code(alice_api):
    response = alice_api.post("/memory/remember", {"scope": "a:b", "text": "x"})
    assert response.data["error"] == "invalid_scope"


@pytest.mark.django_db
def test_recall_sees_ancestors_weighted_and_never_siblings(alice_api):
    # Given facts at the project, at alice's user scope, and at bob's
    services.remember(principal=SYSTEM, scope="acme:*:*", text="My office city is Lisbon")
    remember(alice_api, "My office floor is seven", scope="acme:alice:*")
    remember(alice_api, "My office desk is by the window")
    services.remember(
        principal=SYSTEM, scope="acme:bob:*", text="My office desk is in the basement"
    )
    # When the agent recalls at the project
    response = alice_api.post("/memory/recall", {"scope": SCOPE, "query": "office", "limit": 10})
    # Then the project, user and tenant facts come back, weighted by distance, bob's never
    assert response.status_code == 200
    scopes = {c["scope"]: c["parts"]["weight"] for c in response.data["candidates"]}
    assert scopes == {SCOPE: 1.0, "acme:alice:*": 0.5, "acme:*:*": 0.25}
    assert all("basement" not in c["content"] for c in response.data["candidates"])
    assert response.data["retrieval_id"].startswith("ret_")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scope": SCOPE}, "query"),
        ({"scope": SCOPE, "query": "x", "limit": 0}, "limit"),
        ({"scope": SCOPE, "query": "x", "limit": 51}, "limit"),
        ({"scope": SCOPE, "query": "x", "min_score": 1.5}, "min_score"),
        ({"scope": SCOPE, "query": "x", "min_score": "high"}, "min_score"),
        ({"scope": SCOPE, "query": "x" * 10_001}, "query"),
    ],
)
def test_recall_refusals_name_the_field(alice_api, body, field):
    before = AuditEvent.objects.count()
    response = alice_api.post("/memory/recall", body)
    assert response.status_code == 400
    assert response.data["field"] == field
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
def test_recall_block_is_bounded_and_audited(alice_api):
    remember(alice_api, "My favourite editor is helix")
    response = alice_api.post(
        "/memory/recall-block", {"scope": SCOPE, "query": "favourite editor", "max_chars": 500}
    )
    assert response.status_code == 200
    text = response.data["text"]
    assert text.startswith("<relevant_memories>")
    assert "helix" in text
    assert len(text) <= 500
    assert AuditEvent.objects.filter(event_type="memory.context_injected").exists()
    # And trust and recency alone never inject
    empty = alice_api.post("/memory/recall-block", {"scope": SCOPE, "query": "zebra"})
    assert empty.data["text"] == ""
    assert empty.data["record_ids"] == []


@pytest.mark.django_db
def test_capture_user_turn_is_remembered_and_agent_turns_leave_digests(alice_api):
    user = alice_api.post(
        "/memory/capture", {"scope": SCOPE, "role": "user", "content": "My pager number is 5551"}
    )
    assert user.status_code == 200
    assert user.data["remembered"]["records"][0]["status"] == "active"
    agent = alice_api.post(
        "/memory/capture",
        {"scope": SCOPE, "role": "assistant", "content": "My secret plan is world peace"},
    )
    assert agent.status_code == 200
    assert agent.data["remembered"] is None
    event = AuditEvent.objects.get(event_id=agent.data["audit_event_id"])
    assert event.event_type == "agent.assistant_message"
    assert "world peace" not in event.payload
    assert Record.objects.count() == 1


@pytest.mark.django_db
def test_capture_with_an_unknown_role_is_400_naming_the_role(alice_api):
    response = alice_api.post("/memory/capture", {"scope": SCOPE, "role": "system", "content": "x"})
    assert response.status_code == 400
    assert response.data["field"] == "role"
    assert not AuditEvent.objects.filter(subject_id=SCOPE).exists()


@pytest.mark.django_db
def test_forget_preview_then_apply_returns_a_verifiable_receipt(alice_api):
    # Given two facts
    kept = remember(alice_api, "My gym locker is 12")["records"][0]["record_id"]
    gone = remember(alice_api, "My backup email is alice@example.org")["records"][0]["record_id"]
    # When the agent previews a forget, nothing is purged
    preview = alice_api.post("/memory/forget/preview", {"scope": SCOPE, "selector": "backup"})
    assert preview.status_code == 200
    assert preview.data["record_ids"] == [gone]
    assert Record.objects.get(record_id=gone).status == "active"
    # When it applies exactly the previewed IDs
    response = alice_api.post(
        "/memory/forget",
        {"scope": SCOPE, "selector": "backup", "expected_record_ids": preview.data["record_ids"]},
    )
    # Then the record is tombstoned, the other kept, and the receipt verifies
    assert response.status_code == 200
    receipt = response.data
    assert receipt["format"] == "aetnamem-deletion-receipt-v1"
    assert receipt["purged_record_ids"] == [gone]
    assert Record.objects.get(record_id=gone).status == "tombstoned"
    assert Record.objects.get(record_id=kept).status == "active"
    assert verify_deletion_receipt(json.loads(json.dumps(receipt)), principal=SYSTEM) == []


@pytest.mark.django_db
def test_forget_by_utterance_and_by_record_ids(alice_api):
    first = remember(alice_api, "My parking spot is B7")["records"][0]["record_id"]
    second = remember(alice_api, "My locker code is 4411")["records"][0]["record_id"]
    by_words = alice_api.post(
        "/memory/forget", {"scope": SCOPE, "utterance": "forget my parking spot please"}
    )
    assert by_words.data["purged_record_ids"] == [first]
    by_ids = alice_api.post("/memory/forget", {"scope": SCOPE, "record_ids": [second]})
    assert by_ids.data["purged_record_ids"] == [second]


@pytest.mark.django_db
def test_forget_with_a_changed_match_is_409_and_purges_nothing(alice_api):
    remember(alice_api, "My backup phone is 555")
    response = alice_api.post(
        "/memory/forget",
        {"scope": SCOPE, "selector": "backup", "expected_record_ids": ["mem_other"]},
    )
    assert response.status_code == 409
    assert response.data["field"] == "expected_record_ids"
    assert not Record.objects.filter(status="tombstoned").exists()


@pytest.mark.django_db
def test_forget_an_unknown_record_is_400_naming_record_ids(alice_api):
    remember(alice_api, "My backup phone is 555")
    before = AuditEvent.objects.count()
    response = alice_api.post("/memory/forget", {"scope": SCOPE, "record_ids": ["mem_nope"]})
    assert response.status_code == 400
    assert response.data["field"] == "record_ids"
    assert response.data["error"] == "record_not_found"
    assert AuditEvent.objects.count() == before
    assert not Record.objects.filter(status="tombstoned").exists()


@pytest.mark.django_db
def test_an_empty_forget_is_refused_and_the_refusal_is_recorded(alice_api):
    # memory-engine.md: an empty selector is refused, never read as everything,
    # and recorded as memory.forget_rejected (digest only); nothing else changes.
    remember(alice_api, "My backup phone is 555")
    before = AuditEvent.objects.count()
    for body in ({"scope": SCOPE}, {"scope": SCOPE, "selector": "   "}):
        response = alice_api.post("/memory/forget", body)
        assert response.status_code == 400
        assert response.data["field"] == "selector"
        assert response.data["error"] == "empty_selector"
    rejected = AuditEvent.objects.filter(event_type="memory.forget_rejected")
    assert rejected.count() == 2
    assert AuditEvent.objects.count() == before + 2
    assert Record.objects.get().status == "active"


@pytest.mark.django_db
def test_propose_facts_cite_evidence_and_land_quarantined(alice_api):
    episode = remember(alice_api, "My standup is at nine")["episode_id"]
    response = alice_api.post(
        "/memory/propose",
        {
            "scope": SCOPE,
            "facts": [
                {"content": "User attends a daily standup.", "evidence": [episode]},
                {"content": "User likes mornings.", "evidence": ["ep_unknown"]},
            ],
        },
    )
    assert response.status_code == 201
    [accepted] = response.data["accepted"]
    assert accepted["status"] == "quarantined"
    [rejected] = response.data["rejected"]
    assert rejected["index"] == 1
    assert rejected["reason"] == "unknown_evidence"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("facts", "field"),
    [
        ([], "facts"),
        ([{"content": "x"}], "facts.0.evidence"),
        ([{"evidence": ["ep_1"]}], "facts.0.content"),
        ([{"content": "x", "evidence": []}], "facts.0.evidence"),
        ([{"content": "x", "evidence": ["e"], "confidence": 2}], "facts.0.confidence"),
        ("not a list", "facts"),
    ],
)
def test_propose_refusals_name_the_field(alice_api, facts, field):
    response = alice_api.post("/memory/propose", {"scope": SCOPE, "facts": facts})
    assert response.status_code == 400
    assert response.data["field"] == field
    assert not Record.objects.exists()


@pytest.mark.django_db
def test_log_action_appends_an_agent_event(alice_api):
    response = alice_api.post(
        "/memory/log-action",
        {
            "scope": SCOPE,
            "event_type": "agent.file_written",
            "payload": {"path_sha256": "0" * 64, "bytes": 12},
            "session_id": "s1",
        },
    )
    assert response.status_code == 201
    event = AuditEvent.objects.get(event_id=response.data["audit_event_id"])
    assert event.event_type == response.data["event_type"] == "agent.log.file_written"
    assert event.actor == "agent:test-agent"
    assert response.data["subject_id"] == SCOPE


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"event_type": "memory.forget", "payload": {}}, "event_type"),
        ({"event_type": "agent.Bad Type", "payload": {}}, "event_type"),
        ({"event_type": "agent.ok", "payload": []}, "payload"),
        ({"event_type": "agent.ok"}, "payload"),
        ({"payload": {}}, "event_type"),
    ],
)
def test_log_action_refusals(alice_api, body, field):
    response = alice_api.post("/memory/log-action", {"scope": SCOPE, **body})
    assert response.status_code == 400, response.content
    assert response.data["field"] == field
    assert not AuditEvent.objects.filter(subject_id=SCOPE).exists()


@pytest.mark.django_db
def test_persona_lists_active_facts_with_ids(alice_api):
    record = remember(alice_api, "My timezone is CET")["records"][0]["record_id"]
    response = alice_api.post("/memory/persona", {"scope": SCOPE})
    assert response.status_code == 200
    assert f"[{record}]" in response.data["text"]
    assert response.data["record_ids"] == [record]
    bad = alice_api.post("/memory/persona", {"scope": SCOPE, "max_chars": 0})
    assert bad.status_code == 400
    assert bad.data["field"] == "max_chars"


@pytest.mark.django_db
def test_scenes_group_a_scope_by_session(alice_api):
    remember(alice_api, "My lunch is at noon", session_id="monday")
    remember(alice_api, "My dinner is at seven", session_id="tuesday")
    response = alice_api.get("/memory/scenes", {"scope": SCOPE})
    assert response.status_code == 200
    assert [s["session_id"] for s in response.data["scenes"]] == ["tuesday", "monday"]
    assert response.data["next_cursor"] is None
    bad = alice_api.get("/memory/scenes", {"scope": "nope"})
    assert bad.status_code == 400
    assert bad.data["field"] == "scope"


@pytest.mark.django_db
def test_list_records_pages_by_key(alice_api):
    for word in ["alpha", "bravo", "charlie"]:
        remember(alice_api, f"My codeword is {word}", force=True)
    first = alice_api.get("/memory/records", {"scope": SCOPE, "limit": 2})
    assert first.status_code == 200
    assert len(first.data["items"]) == 2
    assert first.data["next_cursor"]
    second = alice_api.get(
        "/memory/records", {"scope": SCOPE, "limit": 2, "after": first.data["next_cursor"]}
    )
    assert len(second.data["items"]) == 1
    assert second.data["next_cursor"] is None
    statuses = alice_api.get("/memory/records", {"scope": SCOPE, "status": "superseded"})
    assert len(statuses.data["items"]) == 2


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "scope"),
        ({"scope": SCOPE, "status": "deleted"}, "status"),
        ({"scope": SCOPE, "limit": 0}, "limit"),
        ({"scope": SCOPE, "limit": "many"}, "limit"),
        ({"scope": SCOPE, "after": "-1"}, "after"),
    ],
)
def test_list_records_refusals(alice_api, params, field):
    response = alice_api.get("/memory/records", params)
    assert response.status_code == 400
    assert response.data["field"] == field


@pytest.mark.django_db
def test_get_a_record_with_its_chain_and_events(alice_api):
    old = remember(alice_api, "My editor is vim")["records"][0]["record_id"]
    new = remember(alice_api, "Use emacs as my editor from now on")["records"][0]["record_id"]
    response = alice_api.get(f"/memory/records/{new}")
    assert response.status_code == 200
    assert response.data["record"]["supersedes"] == old
    assert [r["record_id"] for r in response.data["supersedes_chain"]] == [old]
    assert response.data["episode"]["text"] == "Use emacs as my editor from now on"
    assert any(e["event_type"] == "memory.record_created" for e in response.data["audit_events"])
    unknown = alice_api.get("/memory/records/mem_unknown")
    assert unknown.status_code == 404


@pytest.mark.django_db
def test_log_action_refuses_a_payload_that_cannot_be_hashed_canonically(alice_api):
    # 1e400 parses as infinity, which canonical JSON cannot represent.
    raw = '{"scope": "' + SCOPE + '", "event_type": "agent.ok", "payload": {"x": 1e400}}'
    response = alice_api.post("/memory/log-action", raw=raw)
    assert response.status_code == 400, response.content
    assert response.data["field"] in {"payload", "body"}
    assert not AuditEvent.objects.filter(subject_id=SCOPE).exists()


@pytest.mark.django_db
def test_scenes_page_by_key_with_after_and_next_cursor(alice_api):
    # Given three sessions at one scope
    for session in ("mon", "tue", "wed"):
        remember(alice_api, f"My {session} lunch is at noon", session_id=session)
    # When the agent lists them two at a time, following next_cursor
    first = alice_api.get("/memory/scenes", {"scope": SCOPE, "limit": 2})
    second = alice_api.get(
        "/memory/scenes", {"scope": SCOPE, "limit": 2, "after": first.data["next_cursor"]}
    )
    # Then each session comes once, newest first, and the short page ends the list
    assert [s["session_id"] for s in first.data["scenes"]] == ["wed", "tue"]
    assert first.data["next_cursor"] == first.data["scenes"][-1]["cursor"]
    assert [s["session_id"] for s in second.data["scenes"]] == ["mon"]
    assert second.data["next_cursor"] is None
    # And a cursor that is not a number is a 400 naming it
    bad = alice_api.get("/memory/scenes", {"scope": SCOPE, "after": "x"})
    assert (bad.status_code, bad.data["field"]) == (400, "after")
