"""Retention and expiry of memory content (issue 32 item 3): policies per subtree, ``expires_at``.

Two things make content lapse:

- a **retention policy** on a scope subtree keeps one kind of content for a
  number of days (:class:`memory.models.RetentionTarget`: stored messages,
  quarantined records, all records). Every policy applies to its whole
  subtree; where two cover the same scope, the shorter keep wins. Without a
  policy, content is kept until forgotten;
- a record's own ``expires_at`` (remember's ``expires_at``, as mem0's
  ``expiration_date``): from that instant recall skips it.

:func:`purge_lapsed` (called by ``manage.py retention run``, see
:mod:`aetnaweb.retention`) purges what lapsed with the forget's own purge
(:func:`memory.services.forgetting._purge`): a lapsed record goes with its
whole supersession lineage, its source message's text is cleared, indexes,
vectors, metadata, kept API answers and freed bytes go as a forget's do.
Each scope's purge is one ``memory.forget`` event with ``"mode": "expired"``
(and ``reasons``: ``expires_at`` and/or ``policy``, ``policy_ids``) and one
deletion receipt, so every receipt verifier checks it unchanged.

A policy's records lapse by lineage: a fact whose newest value is younger
than the keep stays whole (a fresh correction never takes its history away
early, and the history never outlives the keep once the fact stops
changing). A record's ``expires_at`` takes its lineage with it, as a forget
by ID does.

A scope under a legal hold (:mod:`memory.services.holds`) is skipped by the
run and reported as held, with what it would have purged; a purge reaching
it anyway is refused by the hold's purge listener and rolled back.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import AccessDenied, Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import sha256_text
from audit.services import lock_subject
from memory.errors import LegalHoldError, RetentionPolicyError
from memory.models import Episode, Record, RetentionPolicy, RetentionTarget, Status
from memory.services._common import _audit
from memory.services.forgetting import MATCHABLE, _lineage, purge_with_receipt
from memory.services.holds import holds_over
from memory.services.results import _AsDict

# One memory.forget event (and receipt) of a retention run covers at most
# this many records of a scope, so its payload stays a bounded size.
PURGE_CHUNK = 500

# A keep longer than a century is a typo, not a policy.
MAX_KEEP_DAYS = 36500

# The forget's mode of a retention or expiry purge (the memory.forget payload's "mode").
EXPIRED_MODE = "expired"


@dataclass(frozen=True)
class PolicyResult(_AsDict):
    policy_id: str
    scope: str
    target: str
    keep_days: int
    set_by: str
    set_at: str
    audit_event_id: str


@dataclass
class ScopeLapse:
    """What lapsed at one scope: record IDs (lineages included), message IDs, and why."""

    scope: str
    record_ids: set[str] = field(default_factory=set)
    episode_ids: set[str] = field(default_factory=set)
    reasons: set[str] = field(default_factory=set)
    policy_ids: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class RetentionPreview(_AsDict):
    """What the next run would purge: per policy, by expiry, and what holds keep. Writes nothing."""

    # One row per policy: policy_id, scope, target, keep_days, records, episodes, last_run_at...
    policies: tuple[dict[str, Any], ...]
    # Records whose own expires_at passed (lineages included).
    expired_records: int
    # The union over every policy and expiry, held scopes excluded.
    records: int
    episodes: int
    # Scopes that would lose content but are under a legal hold: skipped, with their counts.
    held: tuple[dict[str, Any], ...]


def _admin_scope(principal: Principal, scope: Scope | str) -> Scope:
    parsed = Scope.parse(scope)
    # The same admin-level rule as erasing (and holding) the subtree it purges.
    if not access.may_erase_subject(principal, parsed):
        raise AccessDenied(
            f"{principal.label} may not set or remove retention policies on {parsed}"
        )
    return parsed


def _target(target: Any) -> str:
    if target not in RetentionTarget.values:
        raise RetentionPolicyError(
            f"the target must be one of {', '.join(RetentionTarget.values)} (got {target!r})"
        )
    return str(target)


def _keep_days(keep_days: Any) -> int:
    if isinstance(keep_days, str) and keep_days.strip().isdigit():
        keep_days = int(keep_days.strip())
    if isinstance(keep_days, bool) or not isinstance(keep_days, int):
        raise RetentionPolicyError("keep_days must be a whole number of days")
    if not 1 <= keep_days <= MAX_KEEP_DAYS:
        raise RetentionPolicyError(f"keep_days must be between 1 and {MAX_KEEP_DAYS}")
    return keep_days


def _result(policy: RetentionPolicy, event_id: str) -> PolicyResult:
    return PolicyResult(
        policy_id=policy.policy_id,
        scope=policy.scope,
        target=policy.target,
        keep_days=policy.keep_days,
        set_by=policy.set_by,
        set_at=policy.set_at.isoformat(),
        audit_event_id=event_id,
    )


@storable_text_arguments
@transaction.atomic
def set_retention_policy(
    *,
    scope: Scope | str,
    target: str,
    keep_days: int,
    principal: Principal,
    actor: str | None = None,
) -> PolicyResult:
    """Keep ``target`` at ``scope`` and below for ``keep_days`` days (replacing its keep there)."""
    parsed = _admin_scope(principal, scope)
    checked_target = _target(target)
    days = _keep_days(keep_days)
    actor_label = access.audit_actor(principal, actor)
    lock_subject(str(parsed))
    now = timezone.now()
    policy = (
        RetentionPolicy.objects.select_for_update()
        .filter(scope=str(parsed), target=checked_target)
        .first()
    )
    previous = policy.keep_days if policy else None
    if policy is None:
        policy = RetentionPolicy.objects.create(
            scope=str(parsed),
            **parsed.columns(),
            policy_id="ret_" + secrets.token_hex(16),
            target=checked_target,
            keep_days=days,
            set_by=actor_label,
            set_at=now,
        )
    else:
        policy.keep_days, policy.set_by, policy.set_at = days, actor_label, now
        policy.save(update_fields=["keep_days", "set_by", "set_at"])
    event = _audit(
        scope=parsed,
        event_type="memory.retention_policy_set",
        actor=actor_label,
        payload={
            "policy_id": policy.policy_id,
            "target": checked_target,
            "keep_days": days,
            "previous_keep_days": previous,
        },
    )
    return _result(policy, event.event_id)


@transaction.atomic
def remove_retention_policy(
    *, scope: Scope | str, target: str, principal: Principal, actor: str | None = None
) -> PolicyResult:
    """Remove the keep of ``target`` at exactly ``scope``: that content is kept until forgotten."""
    parsed = _admin_scope(principal, scope)
    checked_target = _target(target)
    actor_label = access.audit_actor(principal, actor)
    lock_subject(str(parsed))
    policy = (
        RetentionPolicy.objects.select_for_update()
        .filter(scope=str(parsed), target=checked_target)
        .first()
    )
    if policy is None:
        raise RetentionPolicyError(f"no retention policy for {checked_target} at exactly {parsed}")
    event = _audit(
        scope=parsed,
        event_type="memory.retention_policy_removed",
        actor=actor_label,
        payload={
            "policy_id": policy.policy_id,
            "target": checked_target,
            "keep_days": policy.keep_days,
        },
    )
    result = _result(policy, event.event_id)
    policy.delete()
    return result


def retention_policies(
    *, principal: Principal, scope: Scope | str | None = None
) -> list[RetentionPolicy]:
    """Policies the principal may read: all of them, or those over or inside ``scope``."""
    rows = RetentionPolicy.objects.order_by("scope", "target")
    if scope is not None:
        parsed = Scope.parse(scope)
        if not access.may(principal, access.READ, parsed):
            raise AccessDenied(f"{principal.label} may not read {parsed}")
        over = set(parsed.visible_strings())
        rows = rows.filter(scope__in=over) | rows.filter(**parsed.subtree_filter())
    return [p for p in rows.distinct() if access.may(principal, access.READ, p.scope)]


# -- what lapsed --------------------------------------------------------------


_LINKS = ("pk", "scope", "record_id", "supersedes_id", "superseded_by_id")


def _lapsed_by_policy(policy: RetentionPolicy, now: datetime) -> dict[str, ScopeLapse]:
    """What ``policy`` lets go now, per scope (record lineages whose newest value is older)."""
    cutoff = now - timedelta(days=policy.keep_days)
    where = Scope.parse(policy.scope).subtree_filter()
    found: dict[str, ScopeLapse] = {}
    if policy.target == RetentionTarget.EPISODES:
        for scope, episode_id in (
            Episode.objects.filter(**where, purged_at__isnull=True, created_at__lt=cutoff)
            .order_by("id")
            .values_list("scope", "episode_id")
        ):
            found.setdefault(scope, ScopeLapse(scope)).episode_ids.add(episode_id)
    else:
        statuses = (
            (Status.QUARANTINED,) if policy.target == RetentionTarget.QUARANTINED else MATCHABLE
        )
        seeds = Record.objects.filter(**where, status__in=statuses, created_at__lt=cutoff)
        by_scope: dict[str, list[Record]] = defaultdict(list)
        # The links only: a policy's seeds may be many, their content is not needed.
        for record in seeds.order_by("id").only(*_LINKS):
            by_scope[record.scope].append(record)
        for scope, records in by_scope.items():
            ids = _old_lineages(Scope.parse(scope), records, cutoff)
            if ids:
                found.setdefault(scope, ScopeLapse(scope)).record_ids.update(ids)
    for lapse in found.values():
        lapse.reasons.add("policy")
        lapse.policy_ids.add(policy.policy_id)
    return found


def _old_lineages(scope: Scope, seeds: list[Record], cutoff: datetime) -> set[str]:
    """The record IDs of every lineage of ``seeds`` whose newest member is older than ``cutoff``."""
    lapsed: set[str] = set()
    seen: set[str] = set()
    for seed in seeds:
        if seed.record_id in seen:
            continue
        if not seed.supersedes_id and not seed.superseded_by_id:
            # Alone in its lineage (the common case): old enough by itself, no query.
            lapsed.add(seed.record_id)
            continue
        members = _lineage(scope, [seed])
        seen.update(members)
        rows = Record.objects.filter(scope=str(scope), record_id__in=members)
        if not rows.filter(created_at__gte=cutoff).exists():
            lapsed.update(
                rows.exclude(status=Status.TOMBSTONED).values_list("record_id", flat=True)
            )
    return lapsed


def _lapsed_by_expiry(now: datetime) -> dict[str, ScopeLapse]:
    """Records whose own ``expires_at`` passed, with their lineages, per scope."""
    by_scope: dict[str, list[Record]] = defaultdict(list)
    for record in (
        Record.objects.filter(expires_at__lte=now)
        .exclude(status=Status.TOMBSTONED)
        .order_by("id")
        .only(*_LINKS)
    ):
        by_scope[record.scope].append(record)
    found: dict[str, ScopeLapse] = {}
    for scope, records in by_scope.items():
        lapse = found.setdefault(scope, ScopeLapse(scope, reasons={"expires_at"}))
        members = _lineage(Scope.parse(scope), records)
        lapse.record_ids.update(
            Record.objects.filter(scope=scope, record_id__in=members)
            .exclude(status=Status.TOMBSTONED)
            .values_list("record_id", flat=True)
        )
    return found


def _merge(into: dict[str, ScopeLapse], more: dict[str, ScopeLapse]) -> None:
    for scope, lapse in more.items():
        target = into.setdefault(scope, ScopeLapse(scope))
        target.record_ids |= lapse.record_ids
        target.episode_ids |= lapse.episode_ids
        target.reasons |= lapse.reasons
        target.policy_ids |= lapse.policy_ids


def _held_hold(scope: str) -> str | None:
    holds = holds_over(scope)
    return holds[0].hold_id if holds else None


def retention_preview(*, principal: Principal, now: datetime | None = None) -> RetentionPreview:
    """Counts of what the next retention run would purge, in the subtrees the principal
    administers (a platform admin: everything); nobody else may ask."""
    if not access.administered_scopes(principal) and not principal.is_system:
        raise AccessDenied(f"{principal.label} administers no scope")
    return _preview(now or timezone.now(), lambda scope: access.may_erase_subject(principal, scope))


def lapsed_counts(now: datetime) -> dict[str, Any]:
    """:func:`retention_preview` of everything as a dict, for a dry run already authorised."""
    return _preview(now, lambda scope: True).as_dict()


def _preview(now: datetime, reaches: Callable[[str], bool]) -> RetentionPreview:
    rows = []
    union: dict[str, ScopeLapse] = {}
    for policy in RetentionPolicy.objects.order_by("scope", "target"):
        if not reaches(policy.scope):
            continue
        lapsed = _lapsed_by_policy(policy, now)
        _merge(union, lapsed)
        free = [lapse for scope, lapse in lapsed.items() if _held_hold(scope) is None]
        rows.append(
            {
                **_policy_row(policy),
                "records": sum(len(lapse.record_ids) for lapse in free),
                "episodes": sum(len(lapse.episode_ids) for lapse in free),
            }
        )
    expired = {s: lapse for s, lapse in _lapsed_by_expiry(now).items() if reaches(s)}
    _merge(union, expired)
    held, records, episodes = [], 0, 0
    for scope in sorted(union):
        lapse = union[scope]
        hold_id = _held_hold(scope)
        if hold_id:
            held.append(_held_row(lapse, hold_id))
        else:
            records += len(lapse.record_ids)
            episodes += len(lapse.episode_ids)
    return RetentionPreview(
        policies=tuple(rows),
        expired_records=sum(
            len(lapse.record_ids) for s, lapse in expired.items() if _held_hold(s) is None
        ),
        records=records,
        episodes=episodes,
        held=tuple(held),
    )


def _policy_row(policy: RetentionPolicy) -> dict[str, Any]:
    return {
        "policy_id": policy.policy_id,
        "scope": policy.scope,
        "target": policy.target,
        "keep_days": policy.keep_days,
        "set_by": policy.set_by,
        "set_at": policy.set_at.isoformat(),
        "last_run_at": policy.last_run_at.isoformat() if policy.last_run_at else None,
        "last_run_records": policy.last_run_records,
        "last_run_episodes": policy.last_run_episodes,
    }


def _held_row(lapse: ScopeLapse, hold_id: str) -> dict[str, Any]:
    return {
        "scope": lapse.scope,
        "hold_id": hold_id,
        "records": len(lapse.record_ids),
        "episodes": len(lapse.episode_ids),
    }


# -- the purge ----------------------------------------------------------------


@dataclass(frozen=True)
class RetentionOutcome(_AsDict):
    """What one retention run purged: per scope, its receipts, and the scopes holds kept."""

    records: int
    episodes: int
    receipts: tuple[dict[str, Any], ...]
    # One row per scope: scope, records, episodes, receipt event IDs.
    scopes: tuple[dict[str, Any], ...]
    held: tuple[dict[str, Any], ...]

    def summary(self) -> dict[str, Any]:
        """The counts and IDs a job result and the retention.run event keep (no content)."""
        return {
            "records": self.records,
            "episodes": self.episodes,
            "receipts": [r["audit_event_id"] for r in self.receipts],
            "scopes": list(self.scopes),
            "held": list(self.held),
        }


def purge_lapsed(
    *, actor: str, job_id: int | None = None, now: datetime | None = None
) -> RetentionOutcome:
    """Purge everything that lapsed (policies and ``expires_at``), scope by scope, with receipts.

    Called by the retention run (which checks the principal). A scope under a
    legal hold is skipped and reported in ``held``.
    """
    now = now or timezone.now()
    union: dict[str, ScopeLapse] = {}
    policies = list(RetentionPolicy.objects.order_by("id"))
    per_policy: dict[str, dict[str, ScopeLapse]] = {}
    for policy in policies:
        per_policy[policy.policy_id] = _lapsed_by_policy(policy, now)
        _merge(union, per_policy[policy.policy_id])
    _merge(union, _lapsed_by_expiry(now))
    receipts: list[dict[str, Any]] = []
    scopes: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    purged_records: set[str] = set()
    purged_episodes: set[str] = set()
    for scope in sorted(union):
        lapse = union[scope]
        hold_id = _held_hold(scope)
        if hold_id:
            held.append(_held_row(lapse, hold_id))
            continue
        try:
            done = purge_scope(lapse, actor=actor, job_id=job_id, now=now)
        except LegalHoldError:  # a hold set since the check: its purge was rolled back
            held.append(_held_row(lapse, _held_hold(scope) or ""))
            continue
        receipts += done
        got_records = {i for r in done for i in r["purged_record_ids"]}
        got_episodes = {i for r in done for i in r["purged_episode_ids"]}
        purged_records |= got_records
        purged_episodes |= got_episodes
        if done:
            scopes.append(
                {
                    "scope": scope,
                    "records": len(got_records),
                    "episodes": len(got_episodes),
                    "receipts": [r["audit_event_id"] for r in done],
                }
            )
    _note_runs(policies, per_policy, purged_records, purged_episodes, now)
    return RetentionOutcome(
        records=len(purged_records),
        episodes=len(purged_episodes),
        receipts=tuple(receipts),
        scopes=tuple(scopes),
        held=tuple(held),
    )


def _note_runs(
    policies: list[RetentionPolicy],
    per_policy: dict[str, dict[str, ScopeLapse]],
    records: set[str],
    episodes: set[str],
    now: datetime,
) -> None:
    for policy in policies:
        lapsed = per_policy[policy.policy_id].values()
        RetentionPolicy.objects.filter(pk=policy.pk).update(
            last_run_at=now,
            last_run_records=len({i for lapse in lapsed for i in lapse.record_ids} & records),
            last_run_episodes=len({i for lapse in lapsed for i in lapse.episode_ids} & episodes),
        )


def purge_scope(
    lapse: ScopeLapse, *, actor: str, job_id: int | None, now: datetime
) -> list[dict[str, Any]]:
    """Purge what lapsed at one scope, in chunks; one deletion receipt per chunk.

    Refused (rolled back) with :class:`LegalHoldError` when a legal hold covers the scope.
    """
    receipts: list[dict[str, Any]] = []
    records = sorted(lapse.record_ids)
    episodes = sorted(lapse.episode_ids)
    while records or episodes:
        chunk_records, records = records[:PURGE_CHUNK], records[PURGE_CHUNK:]
        chunk_episodes, episodes = episodes[:PURGE_CHUNK], episodes[PURGE_CHUNK:]
        receipt = _purge_chunk(lapse, chunk_records, chunk_episodes, actor, job_id, now)
        if receipt is not None:
            receipts.append(receipt)
    return receipts


@transaction.atomic
def _purge_chunk(
    lapse: ScopeLapse,
    record_ids: list[str],
    episode_ids: list[str],
    actor: str,
    job_id: int | None,
    now: datetime,
) -> dict[str, Any] | None:
    scope = Scope.parse(lapse.scope)
    lock_subject(str(scope))
    # Re-read under the lock: a forget since the plan may have purged some already.
    records = list(
        Record.objects.filter(scope=str(scope), record_id__in=record_ids)
        .exclude(status=Status.TOMBSTONED)
        .select_for_update()
        .order_by("id")
    )
    episodes = list(
        Episode.objects.filter(
            scope=str(scope), episode_id__in=episode_ids, purged_at__isnull=True
        ).values_list("episode_id", "text")
    )
    if not records and not episodes:
        return None
    # The selector of a retention purge is what made the content lapse.
    reasons = sorted(lapse.reasons)
    return purge_with_receipt(
        scope,
        records,
        [episode_id for episode_id, _ in episodes],
        episode_texts=[text for _, text in episodes],
        now=now,
        actor=actor,
        mode=EXPIRED_MODE,
        selector_sha256=sha256_text(f"retention {' '.join(reasons)}"),
        details={
            "reasons": reasons,
            "policy_ids": sorted(lapse.policy_ids),
            "retention_job": job_id,
        },
    )
