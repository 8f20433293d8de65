"""Curation of a scope's active records: consolidate duplicates and clashing fact keys."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.services import lock_subject
from memory import search
from memory.extraction import stored_value, value_attribute
from memory.models import Record, Status
from memory.services._common import _audit, _bump, _status_deltas
from memory.services.results import ConsolidateResult


@storable_text_arguments
@transaction.atomic
def consolidate(
    *, scope: Scope | str, principal: Principal, actor: str | None = None
) -> ConsolidateResult:
    """Collapse duplicate active contents and leave one active record per ``fact_key`` at ``scope``.

    Newest wins in both steps; older ones become superseded (kept, linked).
    A second run changes nothing and writes nothing.
    """
    parsed = access.require(principal, access.WRITE, scope)
    lock_subject(str(parsed))
    now = timezone.now()
    # The scope's chain lock (taken above) already serializes writers here;
    # PostgreSQL refuses FOR UPDATE on the GROUP BY queries below.
    active = Record.objects.filter(scope=str(parsed), status=Status.ACTIVE)
    collapsed: list[dict[str, Any]] = []
    retired: list[Record] = []

    def retire(group: list[Record]) -> dict[str, Any]:
        keeper, older = group[-1], group[:-1]
        Record.objects.filter(pk__in=[r.pk for r in older]).update(
            status=Status.SUPERSEDED, superseded_by=keeper.record_id, updated_at=now
        )
        if keeper.supersedes_id is None:
            Record.objects.filter(pk=keeper.pk).update(supersedes=older[-1].record_id)
        retired.extend(older)
        return {"kept": keeper.record_id, "superseded_ids": [r.record_id for r in older]}

    repeated = active.values("content_digest").annotate(n=Count("id")).filter(n__gt=1).order_by()
    for digest_value in sorted(row["content_digest"] for row in repeated):
        group = list(active.filter(content_digest=digest_value).order_by("id"))
        collapsed.append(retire(group))
    keys: list[dict[str, Any]] = []
    clashing = (
        active.exclude(fact_key="")
        .values("fact_key")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .order_by()
    )
    for fact_key in sorted(row["fact_key"] for row in clashing):
        # One active record per attribute of the slot: a son's age and his
        # school are both true (memory-engine.md, supersession).
        by_attribute: dict[str, list[Record]] = {}
        for record in active.filter(fact_key=fact_key).order_by("id"):
            by_attribute.setdefault(value_attribute(stored_value(record.content)), []).append(
                record
            )
        for group in by_attribute.values():
            if len(group) > 1:
                keys.append({"fact_key": fact_key, **retire(group)})
    if not retired:
        return ConsolidateResult(str(parsed), False, (), (), None)
    search.unindex_records([r.pk for r in retired])
    _bump(parsed, **_status_deltas(retired, Status.SUPERSEDED))
    retired_ids = [r.record_id for r in retired]
    event = _audit(
        scope=parsed,
        event_type="memory.consolidated",
        actor=access.audit_actor(principal, actor, default="system"),
        payload={
            "duplicates": collapsed,
            # The slot names stay out of the chain (a forget could not take them
            # back); the records' creation events commit their salted digests.
            "fact_keys": [{k: v for k, v in group.items() if k != "fact_key"} for group in keys],
            "superseded_count": len(retired),
        },
        mentions=retired_ids,
    )
    return ConsolidateResult(str(parsed), True, tuple(collapsed), tuple(keys), event.event_id)
