"""The scope page's chain check: live for short chains, on request for long ones.

Also the selector it reads the length from (``memory.selectors.chain_length``,
added for this page).
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from aetnaweb.access import SYSTEM, AccessDenied, system_principal
from audit.models import AuditEvent
from memory import selectors, services, views
from tests.factories import login_as, make_operator

SCOPE = "acme:alice:proj"


@pytest.fixture
def written(db):
    services.remember(principal=SYSTEM, scope=SCOPE, text="My editor is helix.")
    services.remember(principal=SYSTEM, scope=SCOPE, text="My shell is fish.")
    return AuditEvent.objects.filter(subject_id=SCOPE).count()


def test_chain_length_reads_the_subject_index(written, principal_for):
    # Given a scope with events (granting the reader adds one more), When they ask its length
    reader = principal_for(SCOPE)
    length = selectors.chain_length(reader, scope=SCOPE)
    # Then it is the number of events in that chain; a chain never written has 0
    assert length == AuditEvent.objects.filter(subject_id=SCOPE).count() > written
    assert selectors.chain_length(system_principal(), scope="acme:nobody:*") == 0


def test_chain_length_is_refused_outside_the_grants(written, principal_for):
    with pytest.raises(AccessDenied):
        selectors.chain_length(principal_for("acme:alice:other"), scope=SCOPE)


def test_a_long_chain_is_checked_only_when_asked(client, written, monkeypatch):
    # Given a chain longer than what the page checks on load
    login_as(client, make_operator("vic", [(SCOPE, "viewer")]))
    written = AuditEvent.objects.filter(subject_id=SCOPE).count()  # the grant added one
    monkeypatch.setattr(views, "LIVE_CHAIN_LIMIT", written - 1)
    url = reverse("memory:chain", args=[SCOPE])
    # When the scope page loads its chain status, Then it offers the check instead of running it
    text = client.get(url).content.decode()
    assert f"holds {written} events: too many to check on every page load" in text
    assert f'href="{url}?full=1"' in text
    assert "audit explorer" not in text  # a viewer cannot start a background verification
    # When the operator asks for it, Then the whole chain is verified
    text = client.get(url + "?full=1").content.decode()
    assert f"{written} events checked" in text


def test_auditors_are_pointed_to_the_background_verification(client, written, monkeypatch):
    monkeypatch.setattr(views, "LIVE_CHAIN_LIMIT", 1)
    login_as(client, make_operator("otto", [(SCOPE, "auditor")]))
    text = client.get(reverse("memory:chain", args=[SCOPE])).content.decode()
    assert f"{reverse('audit:explorer')}?scope=acme%3Aalice%3Aproj" in text
