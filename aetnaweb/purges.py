"""Purged content, told to every store that may hold a copy of it (kernel: imports no app).

The memory engine purges content (forget, review's reject); other apps keep
copies of what the engine said (``access`` keeps each API answer sent under an
``Idempotency-Key``, to replay it). Neither may import the other, so a store
that keeps copies registers a listener here from its ``AppConfig.ready()`` and
the engine calls :func:`announce` inside the purging transaction.

Unlike ``audit.subscribers`` (after commit, errors logged), listeners run *in*
the transaction and an exception rolls the purge back: a forget that could not
reach a copy must not return a receipt saying the content is gone.

A copy made *while* a purge runs (an API answer computed before the purge and
kept after it) is the other half: the engine registers a check with
:func:`check_answers_with`, and the store asks :func:`forgotten_in` before it
keeps an answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime


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
# (an answer's bytes, when the request began) -> the IDs it names whose content was
# purged since then.
AnswerCheck = Callable[[bytes, datetime], list[str]]

# an answer's bytes -> the IDs of purgeable content it names (records, episodes).
AnswerNames = Callable[[bytes], list[str]]

_listeners: list[PurgeListener] = []
_answer_checks: list[AnswerCheck] = []
_answer_names: list[AnswerNames] = []


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


def check_answers_with(check: AnswerCheck) -> None:
    """Register the engine's check of an answer about to be kept (see :func:`forgotten_in`)."""
    if check not in _answer_checks:
        _answer_checks.append(check)


def forgotten_in(answer: bytes, *, since: datetime) -> list[str]:
    """The IDs ``answer`` names whose content a purge removed after ``since``, sorted.

    Call it inside the transaction that keeps the answer: a check locks what
    it reads, so a purge still running either commits first (and is seen
    here) or waits until the answer is kept (and then rewrites it).
    """
    found: set[str] = set()
    for check in _answer_checks:
        found.update(check(answer, since))
    return sorted(found)


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


def name_answers_with(names: AnswerNames) -> None:
    """Register the engine's reading of which IDs an answer names (see :func:`names_in`)."""
    if names not in _answer_names:
        _answer_names.append(names)


def names_in(answer: bytes) -> list[str]:
    """The IDs of purgeable content ``answer`` names, sorted.

    A store of copies indexes a copy by these when it keeps it, so that a
    purge finds the copies naming what it purged by index instead of reading
    every copy's bytes.
    """
    found: set[str] = set()
    for names in _answer_names:
        found.update(names(answer))
    return sorted(found)
