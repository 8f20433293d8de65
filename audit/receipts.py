"""Deletion receipts: ``aetnamem-deletion-receipt-v1`` (audit-log-v1).

A receipt is bound to the ``memory.forget`` (or ``memory.record_rejected``)
event that recorded the purge: it names that event's ID and hash, and the
event's payload lists the same purged record and episode IDs.
"""

from __future__ import annotations

from typing import Any

from audit.canonical import digest
from audit.models import AuditEvent

DELETION_RECEIPT_FORMAT = "aetnamem-deletion-receipt-v1"


def build_deletion_receipt(
    *,
    event: AuditEvent,
    selector_sha256: str,
    purged_record_ids: list[str],
    purged_episode_ids: list[str],
) -> dict[str, Any]:
    """The receipt for a purge already recorded by ``event`` (same transaction)."""
    receipt: dict[str, Any] = {
        "format": DELETION_RECEIPT_FORMAT,
        "subject_id": event.subject_id,
        "created_at": event.created_at,
        "selector_sha256": selector_sha256,
        "purged_record_ids": list(purged_record_ids),
        "purged_episode_ids": list(purged_episode_ids),
        "audit_event_id": event.event_id,
        "audit_event_hash": event.event_hash,
    }
    receipt["receipt_sha256"] = digest(receipt)
    return receipt
