"""Purged content, told to every store that may hold a copy of it (kernel: imports no app).

The memory engine purges content (forget, review's reject); other apps keep
copies of what the engine said (``access`` keeps each API answer sent under an
``Idempotency-Key``, to replay it). Neither may import the other, so a store
that keeps copies registers a listener here from its ``AppConfig.ready()`` and
the engine calls :func:`announce` inside the purging transaction.

Unlike ``audit.subscribers`` (after commit, errors logged), listeners run *in*
the transaction and an exception rolls the purge back: a forget that could not
reach a copy must not return a receipt saying the content is gone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class PurgedContent:
    """What one purge removed, by ID: the records and the episodes (messages) it emptied."""

    scope: str
    record_ids: tuple[str, ...]
    episode_ids: tuple[str, ...]

    @property
    def ids(self) -> tuple[str, ...]:
        return self.record_ids + self.episode_ids


PurgeListener = Callable[[PurgedContent], object]

_listeners: list[PurgeListener] = []


def listen(listener: PurgeListener) -> None:
    """Call ``listener(purged)`` inside every purging transaction from now on."""
    if listener not in _listeners:  # ready() may run twice (tests, autoreload)
        _listeners.append(listener)


def announce(purged: PurgedContent) -> None:
    """Tell every listener what was purged; call it inside the purge's transaction."""
    if not purged.ids:
        return
    for listener in _listeners:
        listener(purged)
