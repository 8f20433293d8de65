"""Legal holds (issue 32, item 4): every purge under a held scope is refused, setting and lifting
are audited, from the service, the command, the API and the dashboard."""

from __future__ import annotations

import re
import uuid

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from aetnaweb.access import SYSTEM, AccessDenied, operator_principal
from audit.models import AuditEvent
from jobs.models import Job
from memory import services
from memory.errors import LegalHoldError
from memory.models import LegalHold, Record
from memory.services.erasure import start_subject_erasure
from memory.services.holds import lift_legal_hold, set_legal_hold
from tests.factories import make_operator
from tests.memory.test_erase_subject import APOLLO, DANA, REFERENCE, SIBLING, TENANT, seed

pytestmark = pytest.mark.django_db

MATTER = "CASE-2026-7"


def quarantined(scope: str) -> str:
    result = services.remember(
        principal=SYSTEM, scope=scope, text="<webpage>My favourite drink is zqteazq.</webpage>"
    )
    return result.record_ids[0]


def purges(scope: str) -> dict[str, object]:
    """Every way to purge at ``scope``: forget (words, IDs), reject, and erasing the person."""
    remembered = services.remember(principal=SYSTEM, scope=scope, text="My locker is zq42zq.")
    rejected = quarantined(scope)
    return {
        "forget by words": lambda: services.forget(
            principal=SYSTEM, scope=scope, selector="locker"
        ),
        "forget by ID": lambda: services.forget(
            principal=SYSTEM, scope=scope, record_ids=list(remembered.record_ids)
        ),
        "reject": lambda: services.reject(principal=SYSTEM, scope=scope, record_id=rejected),
        "erase the subject": lambda: start_subject_erasure(
            subtree=DANA, reference=REFERENCE, confirmation=DANA, principal=SYSTEM
        ),
    }


@pytest.mark.parametrize("held", [DANA, APOLLO, TENANT])
@pytest.mark.parametrize("at", [DANA, APOLLO])
def test_a_held_scope_refuses_every_purge_and_writes_nothing(rows, held, at):
    # Given memories at a scope of Dana's, and a hold at it, at an ancestor or inside her subtree
    seed()
    attempts = purges(at)
    set_legal_hold(scope=held, reference=MATTER, principal=SYSTEM)
    before, jobs = rows(), Job.objects.count()
    covered = held in (DANA, TENANT) or held == at
    for name, attempt in attempts.items():
        if not covered and name != "erase the subject":
            continue  # a hold on a project does not keep its parent's own records
        # When it is tried, Then it is refused naming the hold and its reference
        named = rf"legal hold is in force: hold_\w+ on {re.escape(held)} \(reference {MATTER}"
        with pytest.raises(LegalHoldError, match=named):
            attempt()
        # And nothing was purged, recorded or queued
        assert (rows(), Job.objects.count()) == (before, jobs), name


def test_a_lifted_hold_lets_purges_through_again(rows):
    seed()
    set_legal_hold(scope=DANA, reference=MATTER, principal=SYSTEM)
    with pytest.raises(LegalHoldError, match=MATTER):
        services.forget(principal=SYSTEM, scope=DANA, selector="backup email")
    lift_legal_hold(scope=DANA, principal=SYSTEM)
    receipt = services.forget(principal=SYSTEM, scope=DANA, selector="backup email")
    assert len(receipt["purged_record_ids"]) == 2


def test_a_sibling_s_hold_keeps_nothing_of_dana():
    seed()
    set_legal_hold(scope=SIBLING, reference=MATTER, principal=SYSTEM)
    assert services.forget(principal=SYSTEM, scope=DANA, selector="backup email")


def test_setting_and_lifting_are_audited_without_the_reference_text():
    hold = set_legal_hold(scope=DANA, reference=MATTER, principal=SYSTEM, actor="ops")
    lifted = lift_legal_hold(scope=DANA, principal=SYSTEM, actor="ops")
    events = list(AuditEvent.objects.filter(subject_id=DANA).order_by("sequence"))
    assert [e.event_type for e in events] == ["memory.legal_hold_set", "memory.legal_hold_lifted"]
    assert [e.event_id for e in events] == [hold.audit_event_id, lifted.audit_event_id]
    assert all(hold.hold_id in e.payload and MATTER not in e.payload for e in events)
    assert LegalHold.objects.get().lifted_by == "ops"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: set_legal_hold(scope=DANA, reference="", principal=SYSTEM), "reference"),
        (lambda: set_legal_hold(scope=DANA, reference="a\nb", principal=SYSTEM), "one line"),
        (lambda: lift_legal_hold(scope=DANA, principal=SYSTEM), "no legal hold"),
    ],
)
def test_a_refused_hold_request_writes_nothing(rows, call, message):
    before = rows()
    with pytest.raises(LegalHoldError, match=message):
        call()
    assert rows() == before and not LegalHold.objects.exists()


def test_a_second_hold_on_the_same_scope_is_refused():
    set_legal_hold(scope=DANA, reference=MATTER, principal=SYSTEM)
    with pytest.raises(LegalHoldError, match="already under a legal hold"):
        set_legal_hold(scope=DANA, reference="other", principal=SYSTEM)
    assert LegalHold.objects.count() == 1


@pytest.mark.parametrize(
    ("grants", "allowed"),
    [([(DANA, "reviewer")], False), ([(APOLLO, "admin")], False), ([(DANA, "admin")], True)],
)
def test_only_an_admin_of_the_subtree_sets_or_lifts_a_hold(grants, allowed):
    principal = operator_principal(make_operator(f"op{uuid.uuid4().hex[:6]}", grants))
    if allowed:
        set_legal_hold(scope=DANA, reference=MATTER, principal=principal)
        lift_legal_hold(scope=DANA, principal=principal)
        return
    events = AuditEvent.objects.count()  # granting the role was audited
    with pytest.raises(AccessDenied):
        set_legal_hold(scope=DANA, reference=MATTER, principal=principal)
    assert not LegalHold.objects.exists() and AuditEvent.objects.count() == events


def test_the_command_sets_and_lifts(capsys):
    call_command("memory", "legal-hold", DANA, "--reference", MATTER)
    assert "hold_" in capsys.readouterr().out
    with pytest.raises(CommandError, match="already under a legal hold"):
        call_command("memory", "legal-hold", DANA, "--reference", MATTER)
    call_command("memory", "legal-hold", DANA, "--lift")
    assert LegalHold.objects.get().lifted_at is not None


def test_the_dashboard_sets_and_lifts_for_admins_only(client):
    seed()
    url = reverse("memory:legal_hold", args=[DANA])
    client.force_login(make_operator("rev", [(DANA, "reviewer")]))
    assert client.get(url).status_code == 404
    client.force_login(make_operator("boss", [(DANA, "admin")]))
    assert "No legal hold" in client.get(url).content.decode()
    assert client.post(url, {"action": "set", "reference": MATTER}).status_code == 302
    page = client.get(url).content.decode()
    assert MATTER in page and "Lift" in page
    assert "legal hold" in client.get(reverse("memory:scope", args=[APOLLO])).content.decode()
    assert client.post(url, {"action": "lift"}).status_code == 302
    assert LegalHold.objects.get().lifted_at is not None
    assert Record.objects.filter(user="dana").exists()


def test_retention_keeps_the_export_files_of_a_held_scope(settings):
    # Given two export files past their keep-by, one of a scope under a hold
    from datetime import timedelta

    from django.utils import timezone

    from aetnaweb import retention
    from jobs.services import exports_dir, record_job

    exports_dir().mkdir(parents=True, exist_ok=True)
    old = timezone.now() - timedelta(days=400)
    files = {}
    for scope in (APOLLO, SIBLING):
        export = record_job(kind=Job.Kind.EXPORT, scope=scope, started_by="t")
        name = f"export-{export.pk}.jsonl"
        (exports_dir() / name).write_text("{}")
        Job.objects.filter(pk=export.pk).update(
            status=Job.Status.DONE, file_name=name, finished_at=old
        )
        files[scope] = exports_dir() / name
    set_legal_hold(scope=DANA, reference=MATTER, principal=SYSTEM)
    # When retention runs, Then the held scope's file stays and the other goes
    retention.run_retention_now(principal=SYSTEM)
    assert files[APOLLO].exists() and not files[SIBLING].exists()
    # And once the hold is lifted, the next run removes it
    lift_legal_hold(scope=DANA, principal=SYSTEM)
    retention.run_retention_now(principal=SYSTEM)
    assert not files[APOLLO].exists()


def test_the_erasure_preview_names_the_holds_that_would_refuse_it(client):
    seed()
    set_legal_hold(scope=APOLLO, reference=MATTER, principal=SYSTEM)
    from memory.services.erasure import subject_erasure_preview

    holds = subject_erasure_preview(subtree=DANA, principal=SYSTEM).holds
    assert [(h["scope"], h["reference"]) for h in holds] == [(APOLLO, MATTER)]
    client.force_login(make_operator("boss", [(DANA, "admin")]))
    page = client.get(reverse("memory:erase_subject", args=[DANA])).content.decode()
    assert "A legal hold is in force" in page and MATTER in page
