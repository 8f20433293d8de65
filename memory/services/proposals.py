"""Proposals: facts an outside extractor derived, accepted only with evidence, into quarantine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db import transaction
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import sha256_text
from audit.services import lock_subject
from memory.errors import ProposalError
from memory.extraction import UNTRUSTED_CONFIDENCE_CAP, Candidate, normalise_key
from memory.limits import (
    MAX_FACT_CONTENT_CHARS,
    MAX_FACT_EVIDENCE,
    MAX_KEY_CHARS,
    MAX_PROPOSED_FACTS,
)
from memory.models import Episode, Record, SourceType, Status
from memory.services._common import _audit, _bump
from memory.services.remembering import _store_candidate
from memory.services.results import ProposeResult, StoredRecord


def _proposal_rejection(index: int, reason: str, message: str) -> dict[str, Any]:
    return {"index": index, "reason": reason, "message": message}


def _check_evidence(scope: Scope, evidence: Any) -> tuple[list[str], str, str]:
    """Return (evidence IDs, rejection code, message); code is "" when acceptable."""
    if not isinstance(evidence, list) or not evidence:
        return [], "no_evidence", "cite at least one episode or record ID of this scope as evidence"
    if (
        not all(isinstance(item, str) and item for item in evidence)
        or len(evidence) > MAX_FACT_EVIDENCE
    ):
        return (
            [],
            "bad_evidence",
            f"evidence must be a list of at most {MAX_FACT_EVIDENCE} episode or record IDs",
        )
    ids = list(dict.fromkeys(evidence))
    episodes = dict(
        Episode.objects.filter(scope=str(scope), episode_id__in=ids).values_list(
            "episode_id", "purged_at"
        )
    )
    records = dict(
        Record.objects.filter(scope=str(scope), record_id__in=ids).values_list(
            "record_id", "status"
        )
    )
    for item in ids:
        if item in episodes:
            if episodes[item] is not None:
                return ids, "evidence_forgotten", f"evidence {item} was forgotten"
        elif item in records:
            if records[item] == Status.TOMBSTONED:
                return ids, "evidence_forgotten", f"evidence {item} was forgotten"
        else:
            return (
                ids,
                "unknown_evidence",
                f"evidence {item} is not an episode or record of {scope}",
            )
    return ids, "", ""


class _Proposal(NamedTuple):
    content: str
    key: str
    confidence: float


def _read_proposal(index: int, fact: Any) -> _Proposal | dict[str, Any]:
    """One proposed fact's content, key and confidence; or why it is rejected, before any lookup."""
    if not isinstance(fact, dict):
        return _proposal_rejection(index, "not_an_object", "each fact must be an object")
    content = fact.get("content")
    if not isinstance(content, str) or not content.strip() or len(content) > MAX_FACT_CONTENT_CHARS:
        return _proposal_rejection(
            index, "bad_content", f"content must be 1 to {MAX_FACT_CONTENT_CHARS} characters"
        )
    key = fact.get("fact_key") or ""
    if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
        return _proposal_rejection(index, "bad_fact_key", "fact_key must be short text")
    confidence = fact.get("confidence", UNTRUSTED_CONFIDENCE_CAP)
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0 <= confidence <= 1
    ):
        return _proposal_rejection(index, "bad_confidence", "confidence must be from 0 to 1")
    return _Proposal(" ".join(content.split()), key, confidence)


@storable_text_arguments
@transaction.atomic
def propose_facts(
    *,
    scope: Scope | str,
    facts: Sequence[dict[str, Any]],
    principal: Principal,
    actor: str | None = None,
) -> ProposeResult:
    """Accept outside proposals that cite this scope's episodes or records, into quarantine.

    Each fact is ``{"content", "evidence": [ids], "fact_key"?, "confidence"?}``;
    a fact without valid evidence is rejected with the reason, a duplicate is
    not stored twice, accepted ones wait for review as ``derived``.
    """
    parsed = access.require(principal, access.PROPOSE, scope)
    if not isinstance(facts, list | tuple) or not facts:
        raise ProposalError("facts must be a non-empty list of objects")
    if len(facts) > MAX_PROPOSED_FACTS:
        raise ProposalError(f"at most {MAX_PROPOSED_FACTS} facts per proposal")
    actor_label = access.audit_actor(principal, actor, default="system")
    lock_subject(str(parsed))
    now = timezone.now()
    accepted: list[StoredRecord] = []
    duplicates: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    tally: dict[str, int] = {}
    for index, fact in enumerate(facts):
        proposal = _read_proposal(index, fact)
        if isinstance(proposal, dict):
            rejected.append(proposal)
            continue
        content, key, confidence = proposal
        evidence, code, message = _check_evidence(parsed, fact.get("evidence"))
        content_sha256 = sha256_text(content)
        if code:
            rejected.append(_proposal_rejection(index, code, message))
            _audit(
                scope=parsed,
                event_type="memory.proposal_rejected",
                actor=actor_label,
                payload={"index": index, "reason": code, "content_sha256": content_sha256},
            )
            continue
        candidate = Candidate(content, normalise_key(key), float(confidence), "proposed")
        stored, dupes = _store_candidate(
            scope=parsed,
            candidate=candidate,
            trusted=False,
            source_type=SourceType.DERIVED,
            episode=None,
            session_id="",
            turn_id="",
            actor=actor_label,
            now=now,
            tally=tally,
            evidence=evidence,
            # The creation event commits the content's salted digest itself.
            extra_payload={"evidence": evidence},
        )
        if stored:
            accepted.append(stored)
        else:
            duplicates.append({"index": index, "duplicate_of": dupes})
    _bump(parsed, **tally)
    return ProposeResult(str(parsed), tuple(accepted), tuple(duplicates), tuple(rejected))
