"""Retention and expiry of memory content (issue 32 item 3): policies per scope subtree, a record's
own ``expires_at``, purged by the retention run with deletion receipts under the forget's rules."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from aetnaweb import retention as platform_retention
from aetnaweb.access import SYSTEM, AccessDenied, operator_principal, system_principal
from audit.models import AuditEvent
from audit.receipts import verify_deletion_receipt
from audit.verification import verify_subject
from memory import services
from memory.errors import InvalidInput, LegalHoldError, RetentionPolicyError
from memory.models import DeletionReceipt, Episode, Record, RetentionPolicy, Status
from memory.services.holds import set_legal_hold
from memory.services.retention import (
    ScopeLapse,
    purge_lapsed,
    purge_scope,
    remove_retention_policy,
    retention_policies,
    retention_preview,
    set_retention_policy,
)
from tests.factories import make_operator
from tests.memory.test_forget_residue import rows_holding
from tests.tools.test_verify_audit import database_file, parse_report, run_tool

ALICE = "acme:alice:*"
APOLLO = "acme:alice:apollo"
BOB = "acme:bob:*"


def token() -> str:
    return "zq" + uuid.uuid4().hex + "zq"


def age(days: int, *, records=(), episodes=()) -> None:
    """Make rows look ``days`` old (created then)."""
    then = timezone.now() - timedelta(days=days)
    Record.objects.filter(record_id__in=list(records)).update(created_at=then)
    Episode.objects.filter(episode_id__in=list(episodes)).update(created_at=then)


def run() -> dict:
    job = platform_retention.run_retention_now(principal=system_principal())
    assert job.status == job.Status.DONE, job.error
    return job.result


def payload(event: AuditEvent) -> dict:
    return json.loads(event.payload)  # type: ignore[no-any-return]


def events(event_type: str) -> int:
    return AuditEvent.objects.filter(event_type=event_type).count()


# -- policies -----------------------------------------------------------------------


@pytest.mark.django_db
def test_an_admin_sets_replaces_and_removes_a_policy_each_audited():
    # Given an admin of alice's subtree
    admin = operator_principal(make_operator("ret-admin", [(ALICE, "admin")]))
    # When they keep alice's stored messages 30 days, then 7
    first = set_retention_policy(scope=ALICE, target="episodes", keep_days=30, principal=admin)
    second = set_retention_policy(scope=ALICE, target="episodes", keep_days="7", principal=admin)
    # Then one policy holds, with the new keep, and both writes are in alice's chain
    assert second.policy_id == first.policy_id
    assert list(RetentionPolicy.objects.values_list("target", "keep_days")) == [("episodes", 7)]
    set_events = AuditEvent.objects.filter(event_type="memory.retention_policy_set")
    assert [
        json.loads(e.payload)["previous_keep_days"] for e in set_events.order_by("sequence")
    ] == [None, 30]
    assert {e.subject_id for e in set_events} == {ALICE}
    assert [p.policy_id for p in retention_policies(principal=admin)] == [first.policy_id]
    # When they remove it
    removed = remove_retention_policy(scope=ALICE, target="episodes", principal=admin)
    # Then nothing is kept on a clock any more, and the removal is audited
    assert removed.keep_days == 7 and not RetentionPolicy.objects.exists()
    assert events("memory.retention_policy_removed") == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("target", "keep_days", "message"),
    [
        ("everything", 30, "target must be one of"),
        ("episodes", 0, "between 1 and"),
        ("episodes", 99999999, "between 1 and"),
        ("episodes", "thirty", "whole number"),
        ("episodes", True, "whole number"),
        ("episodes", 1.5, "whole number"),
    ],
)
def test_a_bad_policy_is_refused_and_writes_nothing(target, keep_days, message):
    before = AuditEvent.objects.count()
    with pytest.raises(RetentionPolicyError, match=message):
        set_retention_policy(scope=ALICE, target=target, keep_days=keep_days, principal=SYSTEM)
    assert not RetentionPolicy.objects.exists()
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
def test_only_admins_of_the_subtree_set_or_remove_policies():
    set_retention_policy(scope=BOB, target="records", keep_days=10, principal=SYSTEM)
    sibling = operator_principal(make_operator("ret-sib", [(ALICE, "admin")]))
    reviewer = operator_principal(make_operator("ret-rev", [(BOB, "reviewer")]))
    before = AuditEvent.objects.count()
    for principal in (sibling, reviewer):
        with pytest.raises(AccessDenied):
            set_retention_policy(scope=BOB, target="episodes", keep_days=3, principal=principal)
        with pytest.raises(AccessDenied):
            remove_retention_policy(scope=BOB, target="records", principal=principal)
    # A sibling's admin does not even see bob's policy; nothing changed
    assert retention_policies(principal=sibling) == []
    assert RetentionPolicy.objects.count() == 1 and AuditEvent.objects.count() == before
    with pytest.raises(RetentionPolicyError, match="no retention policy"):
        remove_retention_policy(scope=BOB, target="episodes", principal=SYSTEM)
    with pytest.raises(AccessDenied):
        retention_preview(principal=reviewer)


# -- expires_at ----------------------------------------------------------------------


@pytest.mark.django_db
def test_remember_refuses_an_expiry_in_the_past_or_without_a_zone_and_writes_nothing():
    for value, message in (
        ((timezone.now() - timedelta(minutes=1)).isoformat(), "not in the future"),
        ("2999-01-01T00:00:00", "time zone"),
        ("tomorrow", "ISO 8601"),
    ):
        with pytest.raises(InvalidInput, match=message) as caught:
            services.remember(
                principal=SYSTEM, scope=APOLLO, text="My hotel room is 101.", expires_at=value
            )
        assert caught.value.field == "expires_at"
    assert not Record.objects.exists() and not Episode.objects.exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_an_expired_record_is_never_recalled_even_before_the_purge():
    # Given a fact that lapses in an hour and one kept until forgotten
    soon = timezone.now() + timedelta(hours=1)
    room = services.remember(
        principal=SYSTEM, scope=APOLLO, text="My hotel room is 101.", expires_at=soon
    )
    services.remember_fact(
        principal=SYSTEM, scope=APOLLO, key="hotel", value="Grand Budapest", expires_at=soon
    )
    services.remember(principal=SYSTEM, scope=APOLLO, text="My favourite colour is teal.")
    assert Record.objects.get(record_id=room.record_ids[0]).expires_at == soon
    recalled = services.recall(principal=SYSTEM, scope=APOLLO, query="hotel room")
    assert room.record_ids[0] in [c.record_id for c in recalled.candidates if c.returned]
    # When the hour has passed (nothing purged yet)
    Record.objects.filter(expires_at__isnull=False).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    # Then recall skips both, from this and any scope below
    for query in ("hotel room", "hotel"):
        recalled = services.recall(principal=SYSTEM, scope=APOLLO, query=query)
        assert not [
            c for c in recalled.candidates if "hotel" in c.content.lower() or c.fact_key == "hotel"
        ]
    # Nor does recall_block or the persona tell them to the agent
    block = services.recall_block(principal=SYSTEM, scope=APOLLO, query="hotel room")
    assert "hotel" not in block.text.lower()
    persona = services.persona(principal=SYSTEM, scope=APOLLO)
    assert "hotel" not in persona.text.lower() and "teal" in persona.text
    assert Record.objects.filter(status=Status.ACTIVE).count() == 3


@pytest.mark.django_db
def test_the_run_purges_an_expired_record_with_its_lineage_and_a_verifying_receipt():
    # Given a fact with an expiry, superseded by a newer value, and an unrelated fact
    old = services.remember(
        principal=SYSTEM,
        scope=APOLLO,
        text="My hotel room is 101.",
        expires_at=timezone.now() + timedelta(days=1),
    )
    new = services.remember(principal=SYSTEM, scope=APOLLO, text="My hotel room is 205.")
    assert list(new.records[0].superseded_ids) == old.record_ids
    kept = services.remember(principal=SYSTEM, scope=APOLLO, text="My favourite colour is teal.")
    Record.objects.filter(record_id=old.record_ids[0]).update(expires_at=timezone.now())
    # When retention runs
    result = run()
    # Then the lineage went as a forget by ID would take it, its messages emptied
    purged = set(old.record_ids) | set(new.record_ids)
    assert result["memory"]["records"] == 2
    assert set(
        Record.objects.filter(status=Status.TOMBSTONED).values_list("record_id", flat=True)
    ) == (purged)
    assert Record.objects.get(record_id=kept.record_ids[0]).status == Status.ACTIVE
    assert Episode.objects.get(episode_id=old.episode_id).text == ""
    # And one memory.forget event marked as an expiry, with a receipt that verifies
    event = AuditEvent.objects.get(event_type="memory.forget")
    assert payload(event)["mode"] == "expired"
    assert payload(event)["reasons"] == ["expires_at"]
    assert sorted(payload(event)["purged_record_ids"]) == sorted(purged)
    receipt = DeletionReceipt.objects.get(audit_event_id=event.event_id).receipt
    assert verify_deletion_receipt(receipt, principal=SYSTEM) == []
    assert result["memory"]["receipts"] == [event.event_id]
    # And the platform's retention.run event counts it without naming anything
    run_event = AuditEvent.objects.get(event_type="retention.run")
    assert payload(run_event)["memory"] == {
        "records": 2,
        "episodes": 2,
        "receipts": 1,
        "held_scopes": 0,
    }


# -- policies purge ---------------------------------------------------------------------


@pytest.mark.django_db
def test_an_episodes_policy_clears_old_messages_and_keeps_their_facts_and_new_messages():
    old = services.remember(principal=SYSTEM, scope=APOLLO, text="My role is pilot.")
    new = services.remember(principal=SYSTEM, scope=APOLLO, text="My shoe size is 42.")
    elsewhere = services.remember(principal=SYSTEM, scope=BOB, text="My role is cook.")
    age(40, episodes=[old.episode_id, elsewhere.episode_id])
    set_retention_policy(scope=ALICE, target="episodes", keep_days=30, principal=SYSTEM)
    # The preview counts it before anything is purged
    preview = retention_preview(principal=SYSTEM)
    assert [(p["target"], p["episodes"], p["records"]) for p in preview.policies] == [
        ("episodes", 1, 0)
    ]
    assert Episode.objects.get(episode_id=old.episode_id).text
    run()
    assert Episode.objects.get(episode_id=old.episode_id).text == ""
    assert Episode.objects.get(episode_id=new.episode_id).text
    # bob is outside alice's subtree; the facts drawn from the message stay
    assert Episode.objects.get(episode_id=elsewhere.episode_id).text
    assert Record.objects.get(record_id=old.record_ids[0]).status == Status.ACTIVE
    policy = RetentionPolicy.objects.get()
    assert policy.last_run_at is not None and policy.last_run_episodes == 1


@pytest.mark.django_db
def test_a_quarantine_policy_purges_old_quarantined_facts_only():
    web = services.remember(
        principal=SYSTEM, scope=APOLLO, text="<webpage>My favourite colour is red.</webpage>"
    )
    fresh = services.remember(
        principal=SYSTEM, scope=APOLLO, text="<webpage>My shoe size is 44.</webpage>"
    )
    active = services.remember(principal=SYSTEM, scope=APOLLO, text="My role is pilot.")
    age(20, records=[*web.record_ids, *active.record_ids])
    set_retention_policy(scope=APOLLO, target="quarantined", keep_days=14, principal=SYSTEM)
    result = run()
    statuses = dict(Record.objects.values_list("record_id", "status"))
    assert statuses[web.record_ids[0]] == Status.TOMBSTONED
    assert statuses[fresh.record_ids[0]] == Status.QUARANTINED
    assert statuses[active.record_ids[0]] == Status.ACTIVE
    assert result["memory"]["scopes"][0]["scope"] == APOLLO
    event = AuditEvent.objects.get(event_type="memory.forget")
    assert payload(event)["reasons"] == ["policy"]
    assert payload(event)["policy_ids"] == [RetentionPolicy.objects.get().policy_id]


@pytest.mark.django_db
def test_a_records_policy_takes_a_lineage_only_once_its_newest_value_lapsed():
    # Given two facts with old values: one corrected recently, one not since
    email_old = services.remember(principal=SYSTEM, scope=APOLLO, text="My email is a@x.org.")
    email_new = services.remember(principal=SYSTEM, scope=APOLLO, text="My email is b@x.org.")
    role_old = services.remember(principal=SYSTEM, scope=APOLLO, text="My role is pilot.")
    role_new = services.remember(principal=SYSTEM, scope=APOLLO, text="My role is captain.")
    age(100, records=[*email_old.record_ids, *role_old.record_ids, *role_new.record_ids])
    set_retention_policy(scope=ALICE, target="records", keep_days=90, principal=SYSTEM)
    run()
    statuses = dict(Record.objects.values_list("record_id", "status"))
    # Then the email's history stays whole with its fresh value; the role's lineage went
    assert statuses[email_old.record_ids[0]] == Status.SUPERSEDED
    assert statuses[email_new.record_ids[0]] == Status.ACTIVE
    assert statuses[role_old.record_ids[0]] == statuses[role_new.record_ids[0]] == Status.TOMBSTONED


@pytest.mark.django_db
def test_a_dry_run_counts_and_purges_nothing():
    old = services.remember(principal=SYSTEM, scope=APOLLO, text="My role is pilot.")
    age(10, records=old.record_ids, episodes=[old.episode_id])
    set_retention_policy(scope=APOLLO, target="records", keep_days=5, principal=SYSTEM)
    before = AuditEvent.objects.count()
    job = platform_retention.run_retention_now(principal=system_principal(), dry_run=True)
    assert job.result["memory"]["records"] == 1
    assert Record.objects.get().status == Status.ACTIVE
    assert AuditEvent.objects.count() == before
    assert RetentionPolicy.objects.get().last_run_at is None


# -- legal hold --------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_held_scope_is_skipped_visibly_and_refuses_the_retention_purge():
    # Given lapsed content at two scopes, one of them under a legal hold
    held = services.remember(principal=SYSTEM, scope=APOLLO, text="My role is pilot.")
    free = services.remember(principal=SYSTEM, scope=BOB, text="My role is cook.")
    age(10, records=[*held.record_ids, *free.record_ids])
    set_retention_policy(scope="acme:*:*", target="records", keep_days=5, principal=SYSTEM)
    hold = set_legal_hold(scope=ALICE, reference="CASE-7", principal=SYSTEM)
    # The preview says what the hold keeps
    preview = retention_preview(principal=SYSTEM)
    assert [(h["scope"], h["hold_id"], h["records"]) for h in preview.held] == [
        (APOLLO, hold.hold_id, 1)
    ]
    assert preview.records == 1
    # When retention runs
    result = run()
    # Then bob's lapsed record went, alice's stays, and the run reports the hold
    assert Record.objects.get(record_id=free.record_ids[0]).status == Status.TOMBSTONED
    assert Record.objects.get(record_id=held.record_ids[0]).status == Status.ACTIVE
    assert result["memory"]["held"] == [
        {"scope": APOLLO, "hold_id": hold.hold_id, "records": 1, "episodes": 0}
    ]
    # And a purge reaching the held scope directly is refused, writing nothing
    before = (AuditEvent.objects.count(), DeletionReceipt.objects.count())
    lapse = ScopeLapse(APOLLO, record_ids=set(held.record_ids), reasons={"policy"})
    with pytest.raises(LegalHoldError, match="CASE-7"):
        purge_scope(lapse, actor="retention", job_id=None, now=timezone.now())
    assert Record.objects.get(record_id=held.record_ids[0]).content
    assert (AuditEvent.objects.count(), DeletionReceipt.objects.count()) == before


# -- surfaces ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_command_sets_lists_and_removes_policies_and_the_run_prints_memory(capsys):
    call_command("memory", "retention", "set", ALICE, "episodes", "30")
    call_command("memory", "--json", "retention", "list")
    listed = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert [(p["scope"], p["keep_days"]) for p in listed["policies"]] == [(ALICE, 30)]
    call_command("memory", "retention", "list")
    assert "keep episodes 30 days under acme:alice:*" in capsys.readouterr().out
    call_command("retention", "run")
    assert "memory: removed 0 lapsed records and 0 stored messages" in capsys.readouterr().out
    call_command("memory", "retention", "remove", ALICE, "episodes")
    assert not RetentionPolicy.objects.exists()
    before = AuditEvent.objects.count()
    with pytest.raises(CommandError, match="between 1 and"):
        call_command("memory", "retention", "set", ALICE, "episodes", "0")
    with pytest.raises(CommandError, match="not in the future"):
        call_command(
            "memory", "remember", APOLLO, "My role is pilot.", "--expires-at", "2000-01-01T00:00Z"
        )
    assert AuditEvent.objects.count() == before and not Record.objects.exists()
    call_command(
        "memory", "remember", APOLLO, "My role is pilot.", "--expires-at", "2999-01-01T00:00Z"
    )
    assert Record.objects.get().expires_at.year == 2999


# -- nothing left behind ----------------------------------------------------------------


def lapse_everything(settings) -> tuple[str, ...]:
    """Two values of a fact with an expiry, recalled with stored queries, an old message and an
    old quarantined fact under policies; all purged by one retention run."""
    settings.AETNAWEB_STORE_RECALL_QUERIES = True
    old, new, note, web = (token() for _ in range(4))
    soon = timezone.now() + timedelta(days=1)
    services.remember(
        principal=SYSTEM, scope=APOLLO, text=f"My backup email is {old}.", expires_at=soon
    )
    services.remember(principal=SYSTEM, scope=APOLLO, text=f"Use {new} as my backup email.")
    services.recall(principal=SYSTEM, scope=APOLLO, query=f"is {new} my backup email")
    message = services.remember(principal=SYSTEM, scope=APOLLO, text=f"The wifi is {note}.")
    quarantined = services.remember(
        principal=SYSTEM, scope=APOLLO, text=f"<webpage>My favourite colour is {web}.</webpage>"
    )
    age(40, episodes=[message.episode_id], records=quarantined.record_ids)
    set_retention_policy(scope=ALICE, target="episodes", keep_days=30, principal=SYSTEM)
    set_retention_policy(scope=ALICE, target="quarantined", keep_days=14, principal=SYSTEM)
    Record.objects.filter(expires_at__isnull=False).update(expires_at=timezone.now())
    result = run()
    assert result["memory"]["records"] == 3
    return old, new, note, web


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_no_table_holds_content_the_retention_run_purged(settings):
    tokens = lapse_everything(settings)
    assert {t: rows_holding(t) for t in tokens} == {t: [] for t in tokens}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_the_sqlite_files_hold_no_byte_of_content_the_retention_run_purged(settings):
    if connection.vendor != "sqlite":
        pytest.skip("a byte scan of the database files is a SQLite check; see docs/operators.md")
    tokens = lapse_everything(settings)
    database = Path(connection.settings_dict["NAME"])
    files = [Path(f"{database}{suffix}") for suffix in ("", "-wal", "-shm")]
    hits = {
        f"{path.name}:{t[:10]}": path.read_bytes().count(t.encode())
        for path in files
        if path.exists()
        for t in tokens
    }
    assert set(hits.values()) == {0}, hits


@pytest.mark.django_db
def test_purge_lapsed_with_nothing_lapsed_writes_nothing():
    services.remember(principal=SYSTEM, scope=APOLLO, text="My role is pilot.")
    set_retention_policy(scope=ALICE, target="records", keep_days=5, principal=SYSTEM)
    before = AuditEvent.objects.count()
    outcome = purge_lapsed(actor="retention")
    assert (outcome.records, outcome.episodes, outcome.receipts) == (0, 0, ())
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("clean_index")
def test_the_offline_verifier_checks_a_retention_receipt_and_the_chain(tmp_path):
    # Given an expired fact purged by the retention run (committed: the tool reads the file)
    services.remember(
        principal=SYSTEM,
        scope=APOLLO,
        text="My hotel room is 101.",
        expires_at=timezone.now() + timedelta(days=1),
    )
    Record.objects.update(expires_at=timezone.now())
    [event_id] = run()["memory"]["receipts"]
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(DeletionReceipt.objects.get(audit_event_id=event_id).receipt))
    # When tools/verify_audit.py checks the scope's chain and the receipt, standard library only
    result = run_tool(str(database_file(tmp_path)), "--subject", APOLLO, "--receipt", str(path))
    # Then both hold, and so does the engine's own verification
    report = parse_report(result.stdout)
    assert report[f"receipt {path}"] is None, result.stdout
    assert result.returncode == 0, result.stdout + result.stderr
    assert verify_subject(APOLLO, principal=SYSTEM).ok
