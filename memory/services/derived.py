"""Views derived from a scope's records: the persona (audited), scenes by session, inspection."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import sha256_text
from memory import selectors
from memory.limits import MAX_BLOCK_CHARS
from memory.models import Episode, Record, Status
from memory.services._common import _audit, _check_limit
from memory.services.results import Persona, Scene

PERSONA_MAX_CHARS = 1500


PERSONA_MAX_LINES = 200


SCENES_LIMIT = 20


SCENE_ITEMS_LIMIT = 50


@storable_text_arguments
@transaction.atomic
def persona(
    *,
    scope: Scope | str,
    max_chars: int = PERSONA_MAX_CHARS,
    principal: Principal,
    actor: str | None = None,
) -> Persona:
    """A bounded text of the active facts visible from ``scope``; building it is audited.

    Keyed facts first, by key (the nearest scope's value when a slot is set at
    several levels), then unkeyed facts newest first; one ``- [record_id]
    content`` line each, cut at ``max_chars``.
    """
    parsed = access.require_act(principal, access.READ, scope)
    max_chars = _check_limit("max_chars", max_chars, MAX_BLOCK_CHARS)
    visible = parsed.visible_strings()
    depth = {name: index for index, name in enumerate(visible)}  # 0 = nearest
    # A record past its own expires_at is not told to the agent, as recall skips it.
    live = Record.objects.filter(scope__in=visible, status=Status.ACTIVE).exclude(
        expires_at__lte=timezone.now()
    )
    keyed_rows = live.exclude(fact_key="").order_by("fact_key", "-id")[: PERSONA_MAX_LINES * 4]
    chosen: dict[str, Record] = {}
    for record in keyed_rows:
        current = chosen.get(record.fact_key)
        if current is None or depth[record.scope] < depth[current.scope]:
            chosen[record.fact_key] = record
    unkeyed = live.filter(fact_key="").order_by("-id")[:PERSONA_MAX_LINES]
    lines: list[str] = []
    record_ids: list[str] = []
    used = 0
    for record in [*(chosen[key] for key in sorted(chosen)), *unkeyed]:
        line = f"- [{record.record_id}] {' '.join(record.content.split())}\n"
        if used + len(line) > max_chars or len(lines) >= PERSONA_MAX_LINES:
            break
        lines.append(line)
        record_ids.append(record.record_id)
        used += len(line)
    text = "".join(lines)
    persona_sha256 = sha256_text(text)
    event = _audit(
        scope=parsed,
        event_type="memory.persona_built",
        actor=access.audit_actor(principal, actor, default="agent"),
        payload={"record_ids": record_ids, "persona_sha256": persona_sha256, "chars": len(text)},
        mentions=record_ids,
    )
    return Persona(str(parsed), text, tuple(record_ids), persona_sha256, event.event_id)


@storable_text_arguments
@transaction.atomic
def scenes(
    *,
    scope: Scope | str,
    limit: int = SCENES_LIMIT,
    after: int | None = None,
    principal: Principal,
) -> list[Scene]:
    """One scene per session at exactly ``scope``, newest first, with its episodes and records.

    ``after`` is a scene's ``cursor``: only sessions older than it. Derived on the
    fly; nothing is stored or audited.
    """
    # Stored messages are read inside a granted subtree only, as a recall reads
    # (scopes.md): an operator's ancestor read does not reach them.
    parsed = access.require_act(principal, access.READ, scope)
    limit = _check_limit("limit", limit, 200)
    grouped = (
        Episode.objects.filter(scope=str(parsed)).values("session_id").annotate(last=Max("id"))
    )
    if after is not None:
        grouped = grouped.filter(last__lt=after)
    sessions = list(grouped.order_by("-last").values_list("session_id", "last")[:limit])
    result = []
    for session, last in sessions:
        episodes = Episode.objects.filter(scope=str(parsed), session_id=session).order_by("-id")[
            :SCENE_ITEMS_LIMIT
        ]
        # A record its chain purged shows as purged whatever its row was set back to.
        records = list(
            selectors.with_chain_purged(
                Record.objects.filter(scope=str(parsed), session_id=session)
            ).order_by("-id")[:SCENE_ITEMS_LIMIT]
        )
        for record in records:
            if record.chain_purged:
                selectors.as_purged(record)
        result.append(
            Scene(
                session_id=session,
                cursor=str(last),
                episodes=tuple(
                    {
                        "episode_id": e.episode_id,
                        "turn_id": e.turn_id,
                        "source_type": e.source_type,
                        # An emptied message stays empty here even if its text
                        # was put back behind the app's back.
                        "text": "" if e.purged_at is not None else e.text,
                        "purged": e.purged_at is not None,
                        "created_at": e.created_at.isoformat(),
                    }
                    for e in episodes
                ),
                records=tuple(
                    {
                        "record_id": r.record_id,
                        "status": r.status,
                        "fact_key": r.fact_key,
                        "content": r.content,
                        "trust_tier": r.trust_tier,
                        "episode_id": r.episode_id,
                        "created_at": r.created_at.isoformat(),
                    }
                    for r in records
                ),
            )
        )
    return result


def inspect(*, scope: Scope | str, principal: Principal) -> dict[str, Any]:
    """Records (all statuses), episodes, retrieval events, audit events and chain status at ``scope``."""
    return selectors.inspect(principal, scope=scope)
