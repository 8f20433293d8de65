"""Batch remember: many messages at one scope in one transaction (all or nothing).

A batch is one unit: if any item is refused, the whole batch is refused
with the item's index and nothing is stored (no record, no episode, no
audit event). That keeps retries simple (send the corrected batch again,
ideally with an ``Idempotency-Key``) and never leaves a client guessing
which half of its batch landed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.errors import DomainError
from aetnaweb.scopes import Scope
from memory import services
from memory.errors import MemoryEngineError

MAX_BATCH_ITEMS = 100


class BatchItemError(MemoryEngineError):
    """Item ``index`` was refused; the batch stored nothing."""

    def __init__(self, index: int, field: str, cause: Exception) -> None:
        super().__init__(
            f"item {index} was refused, so nothing was stored: {cause}",
            field=f"items.{index}.{field}",
        )
        self.index = index
        self.cause = cause
        # A wrapper: it answers with the refused item's own code (a malformed
        # item, which no service saw, is a field that does not validate).
        self.instance_code = cause.error_code if isinstance(cause, DomainError) else "invalid_field"


@dataclass(frozen=True)
class BatchItem:
    """One message (``text``) or one explicit fact (``key`` and ``value``)."""

    text: str | None = None
    key: str | None = None
    value: str | None = None
    kind: str | None = None
    session_id: str | None = None
    turn_id: str | None = None
    source_type: str | None = None
    force: bool = False
    metadata: dict[str, Any] | None = None
    # When the item's records lapse (remember's expires_at); None: kept until forgotten.
    expires_at: datetime | str | None = None


def _remember_one(
    scope: Scope, item: BatchItem, principal: Principal, actor: str | None
) -> services.RememberResult:
    if item.text is not None:
        return services.remember(
            scope=scope,
            text=item.text,
            session_id=item.session_id,
            turn_id=item.turn_id,
            source_type=item.source_type,
            force=item.force,
            metadata=item.metadata,
            expires_at=item.expires_at,
            principal=principal,
            actor=actor,
        )
    return services.remember_fact(
        scope=scope,
        key=item.key or "",
        value=item.value or "",
        kind=item.kind,
        session_id=item.session_id,
        turn_id=item.turn_id,
        metadata=item.metadata,
        expires_at=item.expires_at,
        principal=principal,
        actor=actor,
    )


@transaction.atomic
def remember_batch(
    *,
    scope: Scope | str,
    items: Sequence[BatchItem],
    principal: Principal,
    actor: str | None = None,
) -> list[services.RememberResult]:
    """Remember each item at exactly ``scope``, in order; one result per item, or nothing at all."""
    parsed = access.require(principal, access.WRITE, scope)
    if not items:
        raise MemoryEngineError("a batch needs at least one item")
    if len(items) > MAX_BATCH_ITEMS:
        raise MemoryEngineError(f"a batch holds at most {MAX_BATCH_ITEMS} items")
    results: list[services.RememberResult] = []
    for index, item in enumerate(items):
        if (item.text is None) == (item.key is None) or (item.key is not None) != (
            item.value is not None
        ):
            raise BatchItemError(index, "text", ValueError("give either text, or key and value"))
        try:
            results.append(_remember_one(parsed, item, principal, actor))
        except MemoryEngineError as exc:
            # The atomic block rolls back the items already stored.
            field: Any = getattr(exc, "field", None) or (
                "text" if item.text is not None else "value"
            )
            raise BatchItemError(index, str(field), exc) from exc
    return results
