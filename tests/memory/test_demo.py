"""manage.py demo: a believable history, printed login, and a second run that changes nothing."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from access.models import ScopeGrant
from aetnaweb.access import SYSTEM
from audit.receipts import verify_deletion_receipt
from audit.verification import verify_all
from memory import services
from memory.demo import seed_demo
from memory.models import Record


def run_demo() -> str:
    out = io.StringIO()
    call_command("demo", stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_demo_seeds_the_story_and_a_second_run_changes_nothing(rows, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    # Given an empty database / When the demo runs
    first = run_demo()
    # Then a login is printed and the history is there
    assert "Sign in as admin" in first and "password:" in first
    assert "memory demo:" in first
    statuses = set(Record.objects.values_list("status", flat=True))
    assert statuses == {"active", "superseded", "quarantined", "tombstoned"}
    assert Record.objects.filter(status="quarantined", source_type="webpage").exists()
    assert verify_all(principal=SYSTEM).ok
    # Inherited facts: recall at a project sees tenant and platform facts
    result = services.recall(
        principal=SYSTEM, scope="acme:alice:apollo", query="support line time convention"
    )
    # (the project's own facts may come back too, by meaning)
    assert {"acme:*:*", "platform:*:*"} <= {c.scope for c in result.returned}
    # The correction superseded the old backup email, linked both ways
    old = Record.objects.get(content__contains="alice.backup@example.com")
    assert old.status == "superseded" and old.superseded_by_id
    # When it runs again / Then no row anywhere changes
    before = rows()
    users, grants = get_user_model().objects.count(), ScopeGrant.objects.count()
    second = run_demo()
    assert rows() == before
    assert (get_user_model().objects.count(), ScopeGrant.objects.count()) == (users, grants)
    assert "already present" in second
    assert first.splitlines()[-2] == second.splitlines()[-2]  # same password line


@pytest.mark.django_db
def test_the_demo_forget_has_a_verifying_receipt():
    summary = seed_demo()
    assert summary.created and len(summary.receipts) == 1
    assert verify_deletion_receipt(summary.receipts[0], principal=SYSTEM) == []
    assert not Record.objects.filter(content__icontains="Elm Street").exists()
    assert seed_demo().created is False
