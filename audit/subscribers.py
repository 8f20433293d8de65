"""Who hears about evidence after it commits: a small, explicit registry.

The evidence layer imports no other app, yet another app (webhooks) must learn
when an event it cares about lands, or when a verification run fails. That
app registers a callback here from its ``AppConfig.ready()``; :func:`announce`
and :func:`announce_failed_run` schedule the callbacks with
``transaction.on_commit``, so a rolled-back write is never announced and a
subscriber's work (queueing a delivery) never runs inside the writer's
transaction. ``robust=True``: a subscriber that raises is logged, never fails
the write that already committed.

This is not a model signal: nothing writes through it, and only the types a
subscriber asked for cost anything on the append path (one set lookup).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from django.db import transaction

from audit.models import AuditEvent, VerificationRun

EventSubscriber = Callable[[AuditEvent], None]
RunSubscriber = Callable[[VerificationRun], None]

_event_subscribers: dict[str, list[EventSubscriber]] = {}
_run_subscribers: list[RunSubscriber] = []


def subscribe_events(callback: EventSubscriber, *, event_types: Iterable[str]) -> None:
    """Call ``callback(event)`` after the commit of each appended event of ``event_types``."""
    for event_type in event_types:
        listeners = _event_subscribers.setdefault(event_type, [])
        if callback not in listeners:  # ready() may run twice (tests, autoreload)
            listeners.append(callback)


def subscribe_failed_runs(callback: RunSubscriber) -> None:
    """Call ``callback(run)`` after a verification run finishes ``failed``."""
    if callback not in _run_subscribers:
        _run_subscribers.append(callback)


def announce(event: AuditEvent) -> None:
    """Schedule the subscribers of ``event.event_type`` for after the current commit."""
    for callback in _event_subscribers.get(event.event_type, ()):
        transaction.on_commit(partial(callback, event), robust=True)


def announce_failed_run(run: VerificationRun) -> None:
    """Schedule the failed-run subscribers (at once when no transaction is open)."""
    for callback in _run_subscribers:
        transaction.on_commit(partial(callback, run), robust=True)
