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


@dataclass(frozen=True)
class ErasedSubtree:
    """A subject erasure: everything stored under ``scope`` (a canonical subtree root) is gone.

    Stores that keep copies by scope rather than by ID (webhook delivery
    bodies) drop every copy about a scope this subtree covers.
    """

    scope: str


ErasureListener = Callable[[ErasedSubtree], object]

_erasure_listeners: list[ErasureListener] = []


def listen_erasure(listener: ErasureListener) -> None:
    """Call ``listener(erased)`` inside every subject erasure's closing transaction from now on."""
    if listener not in _erasure_listeners:
        _erasure_listeners.append(listener)


def announce_erasure(erased: ErasedSubtree) -> None:
    """Tell every erasure listener; call it inside the erasure's transaction."""
    for listener in _erasure_listeners:
        listener(erased)
