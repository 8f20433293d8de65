"""Legal holds on a scope subtree (issue 32): set, lift, and the refusal of every purge under one.

A hold on ``acme:dana:*`` keeps everything stored at that scope and below it:
a forget, a review's reject, a subject erasure (of that subtree, of a scope
inside it, or of a subtree holding it) and any other purge of the engine's
content are refused, with a message naming the hold and its reference.

The refusal sits where every purge passes: :func:`refuse_held_purge` listens
to :mod:`aetnaweb.purges` (registered in ``memory.apps``), which the purge
announces inside its own transaction, so raising there rolls the whole purge
back (records, episodes, the audit event and the receipt). The erasure also
checks before it records a job, so a held subject is refused at the form.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import AccessDenied, Principal
from aetnaweb.purges import PurgedContent
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import sha256_text
from audit.services import lock_subject
from memory.errors import LegalHoldError
from memory.models import LegalHold
from memory.services._common import _audit
from memory.services.results import _AsDict

MAX_REFERENCE_CHARS = 200


@dataclass(frozen=True)
class HoldResult(_AsDict):
    hold_id: str
    scope: str
    reference: str
    set_by: str
    set_at: str
    lifted_by: str
    lifted_at: str | None
    audit_event_id: str


def _result(hold: LegalHold, event_id: str) -> HoldResult:
    return HoldResult(
        hold_id=hold.hold_id,
        scope=hold.scope,
        reference=hold.reference,
        set_by=hold.set_by,
        set_at=hold.set_at.isoformat(),
        lifted_by=hold.lifted_by,
        lifted_at=hold.lifted_at.isoformat() if hold.lifted_at else None,
        audit_event_id=event_id,
    )


def _may_hold(principal: Principal, scope: Scope | str) -> Scope:
    parsed = Scope.parse(scope)
    # The same admin-level rule as erasing the subtree it protects.
    if parsed.is_platform or not access.may_erase_subject(principal, parsed):
        raise AccessDenied(f"{principal.label} may not set or lift a legal hold on {parsed}")
    return parsed


def holds_over(scope: Scope | str) -> list[LegalHold]:
    """Holds in force at ``scope`` or any of its ancestors (exact ``IN``, never a prefix)."""
    parsed = Scope.parse(scope)
    return list(
        LegalHold.objects.filter(
            scope__in=parsed.visible_strings(), lifted_at__isnull=True
        ).order_by("id")
    )


def is_held(scope: Scope | str) -> bool:
    """Is a hold in force at ``scope`` or an ancestor? (Retention keeps such a scope's files.)"""
    return bool(holds_over(scope))


def holds_touching(subtree: Scope | str) -> list[LegalHold]:
    """Holds in force over ``subtree`` or inside it: any would keep something an erasure purges."""
    parsed = Scope.parse(subtree)
    inside = LegalHold.objects.filter(lifted_at__isnull=True, **parsed.subtree_filter())
    return sorted({*holds_over(parsed), *inside.order_by("id")}, key=lambda h: h.pk)


def held_error(holds: list[LegalHold], what: str) -> LegalHoldError:
    named = "; ".join(
        f"{h.hold_id} on {h.scope} (reference {h.reference}, set by {h.set_by})" for h in holds
    )
    return LegalHoldError(
        f"{what} is refused while a legal hold is in force: {named}. Nothing was purged; "
        "an admin lifts the hold when the matter is closed"
    )


def refuse_held_purge(purged: PurgedContent) -> None:
    """The purge listener: raise (rolling the purge back) when a hold covers its scope."""
    holds = holds_over(purged.scope)
    if holds:
        raise held_error(holds, f"a purge at {purged.scope}")


def _reference(reference: Any) -> str:
    if not isinstance(reference, str) or not reference.strip():
        raise LegalHoldError("give the hold's reference (the matter or order it answers)")
    cleaned = reference.strip()
    if len(cleaned) > MAX_REFERENCE_CHARS or not cleaned.isprintable():
        raise LegalHoldError(
            f"the reference must be one line of at most {MAX_REFERENCE_CHARS} printable characters"
        )
    return cleaned


@storable_text_arguments
@transaction.atomic
def set_legal_hold(
    *, scope: Scope | str, reference: str, principal: Principal, actor: str | None = None
) -> HoldResult:
    """Hold everything at ``scope`` and below: purges there are refused until it is lifted."""
    parsed = _may_hold(principal, scope)
    cleaned = _reference(reference)
    actor_label = access.audit_actor(principal, actor)
    lock_subject(str(parsed))
    if LegalHold.objects.filter(scope=str(parsed), lifted_at__isnull=True).exists():
        raise LegalHoldError(f"{parsed} is already under a legal hold; lift it first to replace it")
    try:
        with transaction.atomic():
            hold = LegalHold.objects.create(
                scope=str(parsed),
                **parsed.columns(),
                hold_id="hold_" + secrets.token_hex(16),
                reference=cleaned,
                set_by=actor_label,
                set_at=timezone.now(),
            )
    except IntegrityError as exc:  # a concurrent hold won the race
        raise LegalHoldError(f"{parsed} is already under a legal hold") from exc
    # The reference may name a case or a person: the chain holds its digest.
    event = _audit(
        scope=parsed,
        event_type="memory.legal_hold_set",
        actor=actor_label,
        payload={"hold_id": hold.hold_id, "reference_sha256": sha256_text(cleaned)},
    )
    return _result(hold, event.event_id)


@transaction.atomic
def lift_legal_hold(
    *, scope: Scope | str, principal: Principal, actor: str | None = None
) -> HoldResult:
    """Lift the hold in force at exactly ``scope``; purges there are possible again."""
    parsed = _may_hold(principal, scope)
    actor_label = access.audit_actor(principal, actor)
    lock_subject(str(parsed))
    hold = (
        LegalHold.objects.select_for_update()
        .filter(scope=str(parsed), lifted_at__isnull=True)
        .first()
    )
    if hold is None:
        raise LegalHoldError(f"no legal hold is in force at exactly {parsed}")
    hold.lifted_at = timezone.now()
    hold.lifted_by = actor_label
    hold.save(update_fields=["lifted_at", "lifted_by"])
    event = _audit(
        scope=parsed,
        event_type="memory.legal_hold_lifted",
        actor=actor_label,
        payload={"hold_id": hold.hold_id},
    )
    return _result(hold, event.event_id)


def legal_holds(*, principal: Principal, scope: Scope | str) -> list[LegalHold]:
    """Holds in force that keep ``scope``: over it or inside it (what an admin there may see)."""
    parsed = Scope.parse(scope)
    if not access.may(principal, access.READ, parsed):
        raise AccessDenied(f"{principal.label} may not read {parsed}")
    return holds_touching(parsed)
