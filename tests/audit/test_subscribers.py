"""audit.subscribers: another app hears about committed evidence without the engine importing it."""

from __future__ import annotations

import pytest
from django.db import transaction

from audit import subscribers
from audit.services import HeldLocks, append_event

pytestmark = pytest.mark.django_db


@pytest.fixture
def heard(monkeypatch):
    # A private registry per test: the webhooks app's own subscription stays untouched.
    monkeypatch.setattr(subscribers, "_event_subscribers", {})
    monkeypatch.setattr(subscribers, "_run_subscribers", [])
    got: list = []
    subscribers.subscribe_events(got.append, event_types=["memory.recall"])
    subscribers.subscribe_events(got.append, event_types=["memory.recall"])  # idempotent
    return got


def announcements(pending: list) -> list:
    # On PostgreSQL an append also leaves a no-op hook saying its locks are held.
    return [hook for hook in pending if not isinstance(hook, HeldLocks)]


def append(event_type: str):
    with transaction.atomic():
        return append_event(subject="acme:alice:proj", event_type=event_type, actor="t", payload={})


def test_a_subscriber_hears_its_type_once_after_commit(heard, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as pending:
        event = append("memory.recall")
    assert heard == [] and len(announcements(pending)) == 1  # nothing before the commit
    announcements(pending)[0]()
    assert [e.event_id for e in heard] == [event.event_id]


def test_other_types_cost_nothing(heard, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as pending:
        append("memory.record_created")
    assert announcements(pending) == [] and heard == []


def test_a_failing_subscriber_never_fails_the_committed_write(
    monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(subscribers, "_event_subscribers", {})

    def broken(event):
        raise RuntimeError("subscriber bug")

    subscribers.subscribe_events(broken, event_types=["memory.recall"])
    with django_capture_on_commit_callbacks(execute=True):
        event = append("memory.recall")  # robust=True: logged, not raised
    assert event.sequence
