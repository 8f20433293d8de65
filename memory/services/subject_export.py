"""Export a subject (issue 32, item 2, the right of access): everything stored under one
person's subtree, with a manifest bound to the log.

Every record (status, provenance, supersession links, metadata, dates), every
stored message and every audit event of the scopes under the subtree. The
manifest holds each section's count and digest; a ``memory.subject_exported``
event in the subtree's chain commits the manifest's digest, and the export
carries that event's inclusion proof under the signed checkpoint, so an
auditor checks offline (``tools/verify_audit.py --subject-export FILE``) that
the export is the one the log recorded, nothing dropped or added.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime
from typing import Any

from django.db import transaction

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import digest, loads_strict, sha256_text
from audit.chain import PREIMAGE_FIELDS
from audit.models import AuditEvent
from audit.receipts import log_proof_for
from audit.services import lock_subject
from memory.models import Episode, Record
from memory.services._common import _audit
from memory.services.erasure import clean_reference, require_subject_admin

SUBJECT_EXPORT_FORMAT = "aetnaweb-subject-export-v1"

RECORD_FIELDS = (
    "record_id",
    "scope",
    "status",
    "content",
    "fact_key",
    "kind",
    "source_type",
    "trust_tier",
    "confidence",
    "episode_id",
    "session_id",
    "turn_id",
    "supersedes_id",
    "superseded_by_id",
    "metadata",
    "evidence",
    "created_at",
    "updated_at",
    "deleted_at",
)
EPISODE_FIELDS = (
    "episode_id",
    "scope",
    "session_id",
    "turn_id",
    "source_type",
    "text",
    "created_at",
    "purged_at",
)
# An event as the audit log stores it: its sequence, the hash preimage's fields, its hash.
EVENT_FIELDS = ("sequence", *PREIMAGE_FIELDS, "event_hash")


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _rows(queryset: Any, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{name: _plain(row[name]) for name in fields} for row in queryset.values(*fields)]


@storable_text_arguments
@transaction.atomic
def export_subject(
    *, subtree: Scope | str, reference: str, principal: Principal, actor: str | None = None
) -> dict[str, Any]:
    """Everything stored under ``subtree`` and the audit events of its scopes, with a manifest
    whose digest a ``memory.subject_exported`` event commits. Admins of the subtree only."""
    parsed = require_subject_admin(principal, subtree)
    cleaned = clean_reference(reference)
    where = parsed.subtree_filter()
    records = _rows(Record.objects.filter(**where).order_by("scope", "id"), RECORD_FIELDS)
    episodes = _rows(Episode.objects.filter(**where).order_by("scope", "id"), EPISODE_FIELDS)
    scopes = sorted({row["scope"] for row in records} | {row["scope"] for row in episodes})
    lock_subject(str(parsed))
    events = _rows(
        AuditEvent.objects.filter(subject_id__in=[*scopes, str(parsed)]).order_by("sequence"),
        EVENT_FIELDS,
    )
    for row in events:
        row["payload"] = loads_strict(row["payload"])
    manifest = {
        "subtree": str(parsed),
        "reference_sha256": sha256_text(cleaned),
        "scopes": scopes,
        "records": {"count": len(records), "sha256": digest(records)},
        "episodes": {"count": len(episodes), "sha256": digest(episodes)},
        "audit_events": {"count": len(events), "sha256": digest(events)},
    }
    recorded = _audit(
        scope=parsed,
        event_type="memory.subject_exported",
        actor=access.audit_actor(principal, actor),
        payload={"manifest_sha256": digest(manifest), "records": len(records)},
    )
    return {
        "format": SUBJECT_EXPORT_FORMAT,
        "reference": cleaned,
        "manifest": manifest,
        "manifest_proof": log_proof_for(recorded),
        "records": records,
        "episodes": episodes,
        "audit_events": events,
    }


def export_csv(document: dict[str, Any], section: str) -> str:
    """One section (``records`` or ``episodes``) of an export as CSV (JSON cells for objects)."""
    fields = RECORD_FIELDS if section == "records" else EPISODE_FIELDS
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields)
    writer.writeheader()
    for row in document[section]:
        writer.writerow(
            {
                k: json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v
                for k, v in row.items()
            }
        )
    return out.getvalue()
