"""Import a conversation: every human turn kept word for word, the facts it states linked to it.

What each role keeps (docs/agents.md, "Importing a conversation"):

- ``user``: an episode; the turn word for word as an active record
  (``kind`` "turn", content "<speaker> (<day said>): <text>"); each fact the extractor
  finds in it, active, citing that record in ``evidence``.
- ``other`` (another person): an episode and the turn word for word, with
  the speaker's name; no facts about the user are read from another
  person's "I".
- ``assistant``: an episode only. An agent cannot launder its own words into
  memory; but when the user's next turn in the same session is a plain
  confirmation ("yes, exactly"), the facts the assistant's last sentence
  states about the user are stored ``user_confirmed``, citing both turns.
  When the assistant's last sentence asks what to call the user, the next
  user turn of the session that is just a name ("Sam is fine.") stores the
  user's name, as "Call me Sam." would.
- ``tool``: an episode; keyed facts in it land quarantined, as any tool
  output does, for a person to review.

One transaction for the whole call: every turn is stored, or none is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.sql import pipelined
from aetnaweb.text import check_storable_text
from audit.services import lock_subject
from memory import vectors
from memory.extraction import (
    Candidate,
    SourceReading,
    asks_for_name,
    extract,
    name_reply,
    read_source,
    split_sentences,
    word_tokens,
)
from memory.inputs import ConversationTurn, check_turns
from memory.models import Episode, Role, SourceType, TrustTier
from memory.services._common import _bump
from memory.services.remembering import _ingest, _store_candidate, dated
from memory.services.results import ImportedTurn, ImportResult, StoredRecord

TURN_KIND = "turn"

# A whole turn that only agrees: "Yes, exactly.", "That's right!", "Correct".
_AGREEMENT = (
    r"yes|yeah|yep|yup|exactly|correct|right|indeed|precisely|absolutely|definitely|"
    r"spot on|that'?s (?:right|correct|it)|that is (?:right|correct)|you'?re right|true"
)
_CONFIRMATION = re.compile(
    rf"^\W*(?:(?:{_AGREEMENT})\b[\s,.!]*)+(?:please\b)?[\s.!]*$", re.IGNORECASE
)
# A question tag the assistant ends its check with: "..., right?", "..., is that correct?".
_TAG = re.compile(
    r"[\s,]*(?:right|correct|yes|no|isn'?t it|is that (?:right|correct|so)|am i right|true)?\s*\?*\s*$",
    re.IGNORECASE,
)
# Second person as the user would say it in the first person.
_SECOND_PERSON = re.compile(
    r"\b(?P<word>you're|you've|you'll|you'd|you are|you were|your|yours|yourself|you)\b",
    re.IGNORECASE,
)
_FIRST_PERSON = {
    "you're": "I'm",
    "you've": "I've",
    "you'll": "I'll",
    "you'd": "I'd",
    "you are": "I am",
    "you were": "I was",
    "your": "my",
    "yours": "mine",
    "yourself": "myself",
}
# "you" is the subject at the start of a clause; elsewhere it is an object ("for you").
_SUBJECT_BEFORE = re.compile(
    r"(?:^|[,;:]\s*|\b(?:and|but|so|that|because|when|if)\s+)$", re.IGNORECASE
)
_ASSISTANT_SELF = frozenset({"i", "me", "my", "mine", "myself", "im", "ive", "id", "ill"})


def is_confirmation(text: str) -> bool:
    """Whether a whole turn only agrees with what was said before it."""
    return bool(_CONFIRMATION.match(" ".join(text.split())))


def _as_user_would_say(sentence: str) -> str | None:
    """The assistant's sentence about "you" in the user's first person, or None.

    A sentence where the assistant also speaks of itself ("I think you ...")
    is not rewritten: its "I" is not the user.
    """
    body = _TAG.sub("", sentence.strip())
    words = set(word_tokens(body))
    if not body or words & _ASSISTANT_SELF or not words & {"you", "your", "youre", "youve"}:
        return None

    def first_person(m: re.Match[str]) -> str:
        word = m.group("word")
        key = word.lower().replace("\u2019", "'")
        if key in _FIRST_PERSON:
            out = _FIRST_PERSON[key]
        else:
            out = "I" if _SUBJECT_BEFORE.search(body[: m.start()]) else "me"
        return out[0].upper() + out[1:] if m.start() == 0 else out

    return _SECOND_PERSON.sub(first_person, body) + "."


def confirmed_facts(assistant_text: str) -> list[Candidate]:
    """The facts the assistant's last sentence states about the user, as the user's own."""
    sentences = split_sentences(assistant_text)
    if not sentences:
        return []
    first_person = _as_user_would_say(sentences[-1])
    if first_person is None:
        return []
    return [
        Candidate(c.content, c.fact_key, c.confidence, f"confirmed_{c.rule}")
        for c in extract(first_person, statements=True)
    ]


def verbatim(turn: ConversationTurn) -> Candidate:
    """The turn word for word, with its speaker's name and the day it was said in front.

    "Dana (2 March 2026): I'm allergic to peanuts." The day is part of the
    words, not only of ``occurred_at``, so a question that names it ("What did
    Dana say on March 2, 2026?") or asks when finds the turn; on LoCoMo 1-5
    this took top-10 from 0.733 to 0.766 (docs/memory-engine-notes.md). The
    day is the one on the clock the time was given in.
    """
    text = turn.text.strip()
    said = turn.occurred_at
    day = f"{said.day} {_MONTHS[said.month - 1]} {said.year}" if said else ""
    if turn.speaker and day:
        content = f"{turn.speaker} ({day}): {text}"
    elif turn.speaker or day:
        content = f"{turn.speaker or day}: {text}"
    else:
        content = text
    return Candidate(content, "", 1.0, "turn")


# English month names, not strftime's %B: that one follows the process's locale.
_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


@dataclass(frozen=True)
class _Plan:
    """What one turn will store, decided before the transaction (so it can be embedded ahead)."""

    turn: ConversationTurn
    source_type: str
    trusted: bool
    kept: Candidate | None  # the turn word for word (human turns)
    facts: list[Candidate]  # trusted facts (user) or quarantined ones (tool)
    confirmed: list[Candidate]  # facts of the assistant's turn this one confirms


def _plan(turns: Sequence[ConversationTurn]) -> list[_Plan]:
    now = timezone.now()
    return [_dated(plan, plan.turn.occurred_at or now) for plan in _plan_words(turns)]


def _dated(plan: _Plan, said_at: datetime) -> _Plan:
    """The plan with relative dates in what it stores resolved against when the turn was said."""
    kept = dated([plan.kept], said_at)[0] if plan.kept else None
    return replace(
        plan,
        kept=kept,
        facts=dated(plan.facts, said_at),
        confirmed=dated(plan.confirmed, said_at),
    )


def _plan_words(turns: Sequence[ConversationTurn]) -> list[_Plan]:
    plans: list[_Plan] = []
    last_assistant: dict[str, int] = {}  # session -> index of its latest turn, if an assistant's
    for index, turn in enumerate(turns):
        confirmed: list[Candidate] = []
        reading = read_source(turn.text)
        if turn.role in (Role.USER, Role.OTHER) and not reading.trusted:
            # A human turn that embeds a web page or tool output is that content
            # (as in remember): its blocks' facts land quarantined, nothing is kept
            # as trusted words.
            facts = [c for block in reading.texts for c in extract(block)]
            plans.append(_Plan(turn, reading.source_type, False, None, facts, []))
        elif turn.role == Role.USER:
            before = last_assistant.get(turn.session_id)
            answering = turns[before].text if before is not None and before == index - 1 else None
            if answering is not None and is_confirmation(turn.text):
                confirmed = confirmed_facts(answering)
            facts = extract(turn.text, statements=True)
            # "Sam is fine." names the user only as the answer to "What should I call you?".
            named = name_reply(turn.text) if answering and asks_for_name(answering) else None
            plans.append(
                _Plan(
                    turn,
                    SourceType.USER_MESSAGE,
                    True,
                    verbatim(turn),
                    [named] if named else facts,
                    confirmed,
                )
            )
        elif turn.role == Role.OTHER:
            plans.append(_Plan(turn, SourceType.USER_MESSAGE, True, verbatim(turn), [], []))
        elif turn.role == Role.TOOL:
            plans.append(_Plan(turn, SourceType.TOOL_OUTPUT, False, None, extract(turn.text), []))
        else:
            plans.append(_Plan(turn, SourceType.ASSISTANT_MESSAGE, False, None, [], []))
        if turn.role == Role.ASSISTANT:
            last_assistant[turn.session_id] = index
    return plans


class _TurnWriter:
    """Stores one import's turns in order, inside its transaction (the caller's)."""

    def __init__(self, scope: Scope, actor: str) -> None:
        self.scope, self.actor = scope, actor
        self.now = timezone.now()
        self.tally: dict[str, int] = {}
        self.episodes: list[str] = []

    def _store(
        self,
        plan: _Plan,
        episode: Episode,
        candidate: Candidate,
        *,
        trusted: bool,
        kind: str = "",
        evidence: Sequence[str] = (),
        tier: str = "",
    ) -> tuple[StoredRecord | None, list[str]]:
        return _store_candidate(
            scope=self.scope,
            candidate=candidate,
            trusted=trusted,
            source_type=plan.source_type if not tier else SourceType.USER_MESSAGE,
            episode=episode,
            session_id=plan.turn.session_id,
            turn_id=plan.turn.turn_id,
            actor=self.actor,
            now=self.now,
            tally=self.tally,
            kind=kind,
            evidence=evidence,
            occurred_at=plan.turn.occurred_at,
            trust_tier=tier,
        )

    def turn(self, plan: _Plan) -> ImportedTurn:
        """The turn's episode, then its kept words, its facts and what it confirms."""
        turn = plan.turn
        episode = _ingest(
            self.scope,
            turn.text,
            SourceReading(plan.source_type, plan.trusted, (turn.text,)),
            session=turn.session_id,
            turn=turn.turn_id,
            actor=self.actor,
            trust_tier=TrustTier.TRUSTED_USER if plan.trusted else TrustTier.UNTRUSTED_CONTENT,
            now=self.now,
            occurred_at=turn.occurred_at,
            speaker=turn.speaker,
            role=turn.role,
        )
        self.episodes.append(episode.episode_id)
        stored: list[tuple[StoredRecord | None, list[str]]] = []
        kept_id: list[str] = []
        if plan.kept is not None:
            record, repeats = self._store(plan, episode, plan.kept, trusted=True, kind=TURN_KIND)
            stored.append((record, repeats))
            kept_id = [record.record_id] if record else repeats[:1]
        for fact in plan.facts:
            stored.append(self._store(plan, episode, fact, trusted=plan.trusted, evidence=kept_id))
        for fact in plan.confirmed:
            # Cites the assistant's turn (the words) and the user's (the agreement).
            evidence = [self.episodes[-2], *kept_id]
            tier = TrustTier.USER_CONFIRMED
            stored.append(
                self._store(plan, episode, fact, trusted=True, evidence=evidence, tier=tier)
            )
        return ImportedTurn(
            turn_id=turn.turn_id,
            session_id=turn.session_id,
            role=turn.role,
            episode_id=episode.episode_id,
            records=tuple(record for record, _ in stored if record),
            duplicate_of=tuple(dict.fromkeys(i for _, repeats in stored for i in repeats)),
        )


def _store_turns(scope: Scope, plans: Sequence[_Plan], actor: str) -> list[ImportedTurn]:
    lock_subject(str(scope))
    writer = _TurnWriter(scope, actor)
    imported = [writer.turn(plan) for plan in plans]
    _bump(scope, episodes=len(plans), **writer.tally)
    return imported


def import_conversation(
    *,
    scope: Scope | str,
    turns: Sequence[ConversationTurn | dict[str, Any]],
    principal: Principal,
    actor: str | None = None,
) -> ImportResult:
    """Store a conversation's turns at exactly ``scope``, in order, all or nothing.

    Human turns are kept word for word with speaker and time; facts follow
    the trust rules of the turn's role (module docstring).
    """
    parsed = access.require(principal, access.WRITE, scope)
    checked = check_turns(turns)
    for index, turn in enumerate(checked):
        check_storable_text(turn.text, f"turns.{index}.text")
        check_storable_text(turn.speaker, f"turns.{index}.speaker")
    plans = _plan(checked)
    actor_label = access.audit_actor(principal, actor, default="user")
    active = [
        c.content
        for plan in plans
        for c in ([plan.kept] if plan.kept else [])
        + (plan.facts if plan.trusted else [])
        + plan.confirmed
    ]
    # Embedded ahead, as in remember: the model's work holds no write lock.
    with vectors.prepared(active), transaction.atomic(), pipelined():
        imported = _store_turns(parsed, plans, actor_label)
    return ImportResult(
        scope=str(parsed),
        turns=tuple(imported),
        records_stored=sum(len(t.records) for t in imported),
        superseded_ids=tuple(i for t in imported for r in t.records for i in r.superseded_ids),
    )
