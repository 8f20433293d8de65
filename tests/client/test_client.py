"""The Python client against a live server: every endpoint, typed errors, pagination, retries."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from aetnaweb_client import (
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    Forbidden,
    NotFound,
    RateLimited,
    ServerError,
    TransportError,
    Unauthorized,
)

from audit.models import AuditEvent
from memory.models import Record
from tests.api.conftest import issue_token
from tests.api.test_actions_api import write_op
from tests.client.conftest import SCOPE
from tests.factories import ensure_authorizing_episode

pytestmark = pytest.mark.django_db(transaction=True)


def test_remember_then_recall_round_trip(alice):
    # Given a token for acme:alice:*
    # When the agent remembers a fact and recalls it
    stored = alice.remember(SCOPE, "My backup email is alice@example.org", session_id="s1")
    recalled = alice.recall(SCOPE, "backup email")
    # Then the record comes back first, and the recall was audited
    [record] = stored["records"]
    assert record["status"] == "active"
    assert recalled["candidates"][0]["record_id"] == record["record_id"]
    assert recalled["returned_ids"][0] == record["record_id"]
    assert AuditEvent.objects.filter(event_id=recalled["audit_event_id"]).exists()


def test_every_memory_endpoint(alice):
    stored = alice.remember(SCOPE, key="deploy window", value="Tuesdays 9-11", kind="ops")
    record_id = stored["records"][0]["record_id"]
    assert alice.whoami()["scope"] == "acme:alice:*"
    block = alice.recall_block(SCOPE, "deploy window", min_score=0.0)
    assert record_id in block["record_ids"]
    assert record_id in alice.persona(SCOPE)["record_ids"]
    assert alice.get_record(record_id)["record"]["content"] == "deploy window: Tuesdays 9-11"
    captured = alice.capture(SCOPE, "assistant", "Sure, noted.", session_id="s2")
    assert captured["remembered"] is None
    logged = alice.log_action(SCOPE, "agent.file_written", {"bytes": 3})
    assert logged["subject_id"] == SCOPE
    episode = alice.remember(SCOPE, "My shell is zsh", session_id="s3")["episode_id"]
    proposed = alice.propose(SCOPE, [{"content": "User likes zsh", "evidence": [episode]}])
    assert proposed["accepted"][0]["status"] == "quarantined"
    assert alice.scenes(SCOPE)["scenes"][0]["session_id"] == "s3"


def test_forget_with_preview_then_apply(alice):
    alice.remember(SCOPE, "My backup email is alice@example.org")
    preview = alice.forget_preview(SCOPE, selector="backup email")
    receipt = alice.forget(
        SCOPE, selector="backup email", expected_record_ids=preview["record_ids"]
    )
    assert receipt["format"] == "aetnamem-deletion-receipt-v1"
    assert receipt["purged_record_ids"] == preview["record_ids"]
    # the records are tombstoned: no read shows them any more
    assert list(alice.iter_records(SCOPE, status="active")) == []
    assert alice.recall(SCOPE, "backup email")["returned_ids"] == []


def test_forget_below_with_the_count_and_a_reference_returns_the_bundle(alice):
    # Given eleven matches at the user scope's project and one at the user scope
    user = "acme:alice:*"
    for n in range(11):
        alice.remember(SCOPE, f"Remember that ticket {n} is about the printer.")
    alice.remember(user, "Remember that the printer ticket queue is long.")
    preview = alice.forget_preview(user, selector="printer", include_below=True)
    assert preview["count"] == 12 and [b["scope"] for b in preview["below"]] == [SCOPE]
    # Without the count it is refused (400, the field named) and nothing purged
    with pytest.raises(BadRequest) as refused:
        alice.forget(
            user, selector="printer", include_below=True, expected_record_ids=preview["record_ids"]
        )
    assert refused.value.code == "forget_count_not_confirmed"
    assert refused.value.field == "confirm_count"
    assert not Record.objects.filter(status="tombstoned").exists()
    # With it, one row left out and a reference, the bundle comes back
    bundle = alice.forget(
        user,
        selector="printer",
        include_below=True,
        expected_record_ids=preview["record_ids"],
        exclude_record_ids=[preview["below"][0]["record_ids"][0]],
        confirm_count=11,
        reference="REQ-2041",
    )
    assert bundle["format"] == "aetnaweb-forget-bundle-v1" and bundle["reference"] == "REQ-2041"
    assert sum(len(r["purged_record_ids"]) for r in bundle["receipts"]) == 11


def test_forget_a_message_with_no_record_by_words_then_a_session(alice):
    said = alice.remember(SCOPE, "The wifi password at the office is tulip-42.")
    assert said["records"] == []
    preview = alice.forget_preview(SCOPE, utterance="forget the wifi password")
    assert preview["episode_ids"] == [said["episode_id"]]
    receipt = alice.forget(
        SCOPE,
        utterance="forget the wifi password",
        expected_record_ids=preview["record_ids"],
        expected_episode_ids=preview["episode_ids"],
    )
    assert receipt["purged_episode_ids"] == [said["episode_id"]]
    alice.remember(SCOPE, "My shell is zsh", session_id="s9")
    assert len(alice.forget(SCOPE, session_id="s9")["purged_record_ids"]) == 1


def test_a_stale_forget_preview_is_a_conflict_and_purges_nothing(alice):
    first = alice.remember(SCOPE, "My backup email is a@example.org")["records"][0]
    with pytest.raises(Conflict) as caught:
        alice.forget(SCOPE, selector="backup email", expected_record_ids=["mem_other"])
    assert caught.value.code == "forget_preview_stale"
    assert caught.value.field == "expected_record_ids"
    assert Record.objects.filter(record_id=first["record_id"]).exists()


def test_refusals_are_typed_exceptions_carrying_code_and_field(alice, make_client, server_url):
    # Bad input: 400 naming the field, nothing written
    with pytest.raises(BadRequest) as bad:
        alice.remember("not a scope", "My shell is zsh")
    assert (bad.value.status, bad.value.code, bad.value.field) == (400, "invalid_scope", "scope")
    assert not Record.objects.exists()
    # Outside the token's subtree: 404, like something that does not exist
    with pytest.raises(NotFound) as outside:
        alice.recall("acme:bob:proj", "anything")
    assert outside.value.code == "not_found"
    with pytest.raises(NotFound):
        alice.get_record("../../token")
    # Inside it without the capability: 403
    reader = make_client("acme:alice:*", ["read"])
    with pytest.raises(Forbidden) as forbidden:
        reader.remember(SCOPE, "My shell is zsh")
    assert forbidden.value.code == "capability_missing"
    # A bad token: 401
    with Client(server_url, token="aetna_nope") as stranger, pytest.raises(Unauthorized):
        stranger.whoami()


def test_iterators_follow_the_cursor_across_pages(alice):
    # Given five records and three sessions
    for index in range(5):
        alice.remember(SCOPE, f"My note {index} is kept", force=True, session_id=f"s{index % 3}")
    # When iterating two at a time
    records = list(alice.iter_records(SCOPE, page_size=2))
    scenes = list(alice.iter_scenes(SCOPE, page_size=2))
    # Then every record and scene comes exactly once, newest first
    assert len(records) == 5 == len({r["record_id"] for r in records})
    assert [r["record_id"] for r in records] == sorted(
        (r["record_id"] for r in records),
        key=lambda rid: Record.objects.get(record_id=rid).pk,
        reverse=True,
    )
    assert sorted(s["session_id"] for s in scenes) == ["s0", "s1", "s2"]


def test_actions_and_audit_endpoints(alice, tmp_path, settings):
    settings.AETNAWEB_ACTIONS_ROOT = str(tmp_path)
    settings.AETNAWEB_CHECKPOINT_SINK = str(tmp_path / "checkpoints.jsonl")
    (tmp_path / "notes").mkdir()
    ensure_authorizing_episode("msg-1")  # the user message the plan's evidence cites
    operation = write_op(path="notes/a.txt")
    staged = [alice.stage(SCOPE, [operation]) for _ in range(3)]
    ids = [t["transaction_id"] for t in alice.iter_transactions(page_size=2)]
    assert ids == [t["transaction_id"] for t in reversed(staged)]
    assert alice.get_transaction(ids[0])["transaction"]["state"] == "awaiting_approval"
    assert alice.verify_transaction(ids[0])["valid"] is True
    assert alice.verify_audit()["ok"] is True
    lines = alice.export_audit(subject=SCOPE).splitlines()
    assert all(json.loads(line)["subject_id"] == SCOPE for line in lines)
    checkpoint = json.loads(alice.create_checkpoint())
    assert checkpoint["format"] == "aetnamem-checkpoint-v1"


def test_async_client_round_trip_and_iteration(server_url):
    token = issue_token("acme:alice:*")

    async def scenario() -> tuple[list[str], str, int]:
        async with AsyncClient(server_url, token=token) as mem:
            await asyncio.gather(
                *(mem.remember(SCOPE, f"My note {i} is kept", force=True) for i in range(3))
            )
            recalled = await mem.recall(SCOPE, "note kept")
            records = [r["record_id"] async for r in mem.iter_records(SCOPE, page_size=2)]
            try:
                await mem.recall(SCOPE, "x", limit=0)
            except BadRequest as exc:
                field = exc.field or ""
            return records, field, len(recalled["candidates"])

    records, field, candidates = asyncio.run(scenario())
    assert len(records) == 3 == candidates
    assert field == "limit"


def _flaky(statuses: list[int], seen: list[str]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        status = statuses.pop(0) if statuses else 200
        body = {"error": "unavailable", "field": None, "detail": "try later"}
        return httpx.Response(status, json=body if status >= 400 else {"scope": "a:b:c"})

    return httpx.MockTransport(handler)


def test_gets_are_retried_on_503_but_writes_never_are():
    # Given a server that answers 503 once
    seen: list[str] = []
    client = Client("http://x", token="t", transport=_flaky([503], seen), backoff=0)
    # When reading: the GET is retried and succeeds
    assert client.whoami() == {"scope": "a:b:c"}
    assert seen == ["GET", "GET"]
    # When writing against the same failure: one attempt, a typed error
    seen.clear()
    writer = Client("http://x", token="t", transport=_flaky([503], seen), backoff=0)
    with pytest.raises(ServerError) as caught:
        writer.remember(SCOPE, "My shell is zsh")
    assert seen == ["POST"]
    assert caught.value.code == "unavailable"


def test_an_unreachable_server_is_a_transport_error_after_the_retries():
    seen: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        raise httpx.ConnectError("refused", request=request)

    client = Client("http://x", token="t", transport=httpx.MockTransport(refuse), backoff=0)
    with pytest.raises(TransportError):
        client.list_records(SCOPE)
    assert len(seen) == 3  # one try and two retries


def _limited_then_ok(count: int, seen: list[httpx.Request], retry_after: str | None = "7"):
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) <= count:
            headers = {"Retry-After": retry_after} if retry_after is not None else {}
            body = {"error": "rate_limited", "field": None, "detail": "slow down"}
            return httpx.Response(429, json=body, headers=headers)
        return httpx.Response(201, json={"scope": SCOPE, "records": []})

    return httpx.MockTransport(handler)


def test_a_429_is_waited_out_as_retry_after_says_then_retried_with_the_same_key(monkeypatch):
    # Given a server that answers 429 (Retry-After: 7) twice, then accepts
    waits: list[float] = []
    monkeypatch.setattr("aetnaweb_client.client.time.sleep", waits.append)
    seen: list[httpx.Request] = []
    client = Client("http://x", token="t", transport=_limited_then_ok(2, seen))
    # When a write is sent
    result = client.remember(SCOPE, "My shell is zsh")
    # Then the client waited what the server said, retried, and succeeded
    assert result["scope"] == SCOPE
    assert waits == [7.0, 7.0]
    assert len(seen) == 3
    # And every attempt carried one Idempotency-Key (a retry is a replay, never a second write)
    keys = {request.headers["Idempotency-Key"] for request in seen}
    assert len(keys) == 1 and len(keys.pop()) == 36


def test_after_its_retries_a_429_raises_rate_limited_carrying_retry_after(monkeypatch):
    # Given a server that keeps answering 429 and a client allowed one retry, waits capped at 2 s
    waits: list[float] = []
    monkeypatch.setattr("aetnaweb_client.client.time.sleep", waits.append)
    seen: list[httpx.Request] = []
    client = Client(
        "http://x",
        token="t",
        transport=_limited_then_ok(99, seen),
        rate_limit_retries=1,
        max_retry_after=2,
    )
    # When reading / Then one capped wait, two tries, and the typed error with the server's figure
    with pytest.raises(RateLimited) as caught:
        client.whoami()
    assert waits == [2.0]
    assert len(seen) == 2
    assert caught.value.retry_after == 7.0
    assert (caught.value.status, caught.value.code) == (429, "rate_limited")
    assert "Idempotency-Key" not in seen[0].headers  # reads carry no key


def test_zero_rate_limit_retries_raises_at_once_and_no_retry_after_means_none(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr("aetnaweb_client.client.time.sleep", waits.append)
    seen: list[httpx.Request] = []
    client = Client(
        "http://x",
        token="t",
        transport=_limited_then_ok(1, seen, retry_after=None),
        rate_limit_retries=0,
    )
    with pytest.raises(RateLimited) as caught:
        client.remember(SCOPE, "My shell is zsh")
    assert (waits, len(seen), caught.value.retry_after) == ([], 1, None)


def test_every_write_sends_its_own_idempotency_key():
    seen: list[httpx.Request] = []
    client = Client("http://x", token="t", transport=_limited_then_ok(0, seen))
    client.remember(SCOPE, "My shell is zsh")
    client.remember(SCOPE, "My shell is zsh")
    keys = [request.headers["Idempotency-Key"] for request in seen]
    assert len(set(keys)) == 2


def test_the_async_client_waits_out_a_429_too(monkeypatch):
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("aetnaweb_client.client.asyncio.sleep", fake_sleep)
    seen: list[httpx.Request] = []

    async def main() -> None:
        async with AsyncClient("http://x", token="t", transport=_limited_then_ok(1, seen)) as c:
            await c.remember(SCOPE, "My shell is zsh")

    asyncio.run(main())
    assert waits == [7.0]
    assert len({r.headers["Idempotency-Key"] for r in seen}) == 1 and len(seen) == 2
