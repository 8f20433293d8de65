"""Erase a subject: everything stored under one person's scope subtree, as a job, with a certificate.

A person's request ("delete everything you keep about me") is many forgets:
every scope under ``acme:dana:*``, every record in any status, every stored
message. The erasure previews counts per scope, needs the subtree typed back
as confirmation and the request's reference, then runs as a job
(:mod:`jobs`) that purges each scope with the forget's own purge
(:func:`memory.services.forgetting._purge`, so indexes, vectors, metadata,
kept API answers and freed bytes go exactly as a forget's do), one
``memory.forget`` event and deletion receipt per scope (per chunk of a large
scope). It ends in one erasure certificate bundling those receipts, each
with its inclusion proof under a signed checkpoint, and closed by a
``memory.subject_erased`` event in the subtree's chain committing the set of
receipt digests (so no receipt can be dropped from the certificate unseen);
``tools/verify_audit.py --erasure-certificate`` checks it all offline.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from aetnaweb import access, purges
from aetnaweb.access import AccessDenied, Principal
from aetnaweb.scopes import Scope
from aetnaweb.text import storable_text_arguments
from audit.canonical import digest, sha256_text
from audit.receipts import log_proof_for
from audit.services import lock_subject
from jobs.models import Job
from jobs.services import (
    Progress,
    exports_dir,
    queue_after_commit,
    record_job,
    remove_file,
    run_job,
)
from memory.errors import SubjectErasureError
from memory.models import Episode, Record, RetrievalEvent, Status
from memory.services._common import _audit
from memory.services.forgetting import purge_with_receipt
from memory.services.holds import held_error, holds_touching
from memory.services.results import _AsDict

ERASURE_CERTIFICATE_FORMAT = "aetnaweb-erasure-certificate-v1"

# One memory.forget event (and receipt) covers at most this many records of a
# scope, so an event payload listing the purged IDs stays a bounded size.
ERASE_CHUNK = 500

# A reference names the request in the operator's own system (a ticket number).
MAX_REFERENCE_CHARS = 200


@dataclass(frozen=True)
class SubjectErasurePreview(_AsDict):
    """What erasing ``subtree`` would purge, per scope. Writes nothing."""

    subtree: str
    # One row per scope: {"scope", "records": {status: n}, "episodes", "recall_events"}
    scopes: tuple[dict[str, Any], ...]
    records: int
    episodes: int
    # What the operator types back to confirm: the subtree, exactly.
    confirmation: str
    # Legal holds over or inside the subtree: while any is in force, the erasure is refused.
    holds: tuple[dict[str, str], ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.records and not self.episodes


def require_subject_admin(principal: Principal, subtree: Scope | str) -> Scope:
    parsed = Scope.parse(subtree)
    if parsed.depth < 2:
        raise SubjectErasureError(
            f"{parsed} is above one person: a subject erasure covers one user's subtree "
            "(tenant:user:* or tenant:user:project)"
        )
    # An admin-level operation on the whole subtree (aetnaweb.access.may_erase_subject).
    if not access.may_erase_subject(principal, parsed):
        raise AccessDenied(f"{principal.label} may not erase the subject {parsed}")
    return parsed


def _per_scope(subtree: Scope) -> list[dict[str, Any]]:
    """Counts of what still holds content under ``subtree``, one entry per scope that has any."""
    where = subtree.subtree_filter()
    scopes: dict[str, dict[str, Any]] = {}

    def entry(scope: str) -> dict[str, Any]:
        return scopes.setdefault(
            scope, {"scope": scope, "records": {}, "episodes": 0, "recall_events": 0}
        )

    for scope, status, count in (
        Record.objects.filter(**where)
        .exclude(status=Status.TOMBSTONED)
        .values_list("scope", "status")
        .annotate(n=Count("id"))
    ):
        entry(scope)["records"][status] = count
    for scope, count in (
        Episode.objects.filter(**where, purged_at__isnull=True)
        .values_list("scope")
        .annotate(n=Count("id"))
    ):
        entry(scope)["episodes"] = count
    for scope, count in (
        RetrievalEvent.objects.filter(**where)
        .exclude(query_text="")
        .values_list("scope")
        .annotate(n=Count("id"))
    ):
        entry(scope)["recall_events"] = count
    return [scopes[name] for name in sorted(scopes)]


def subject_erasure_preview(*, subtree: Scope | str, principal: Principal) -> SubjectErasurePreview:
    """Counts per scope of what erasing ``subtree`` would purge; admins of the subtree only."""
    parsed = require_subject_admin(principal, subtree)
    rows = _per_scope(parsed)
    return SubjectErasurePreview(
        subtree=str(parsed),
        scopes=tuple(rows),
        records=sum(sum(row["records"].values()) for row in rows),
        episodes=sum(row["episodes"] for row in rows),
        confirmation=str(parsed),
        holds=tuple(
            {"hold_id": h.hold_id, "scope": h.scope, "reference": h.reference}
            for h in holds_touching(parsed)
        ),
    )


def clean_reference(reference: Any) -> str:
    if not isinstance(reference, str) or not reference.strip():
        raise SubjectErasureError(
            "give the request's reference (the ticket or letter this erasure answers); "
            "it is recorded with the erasure and in its certificate"
        )
    cleaned = reference.strip()
    if len(cleaned) > MAX_REFERENCE_CHARS or not cleaned.isprintable():
        raise SubjectErasureError(
            f"the reference must be one line of at most {MAX_REFERENCE_CHARS} printable characters"
        )
    return cleaned


@storable_text_arguments
@transaction.atomic
def start_subject_erasure(
    *,
    subtree: Scope | str,
    reference: str,
    confirmation: str,
    principal: Principal,
    started_by: str | None = None,
    queue: bool = True,
) -> Job:
    """Record the erasure of everything under ``subtree`` and queue it; refused with nothing written
    unless the subtree is typed back exactly, a reference is given and something is stored there."""
    parsed = require_subject_admin(principal, subtree)
    cleaned = clean_reference(reference)
    if not isinstance(confirmation, str) or confirmation.strip() != str(parsed):
        raise SubjectErasureError(
            f"type the subtree {parsed} exactly to confirm: the erasure cannot be undone"
        )
    held = holds_touching(parsed)
    if held:
        raise held_error(held, f"erasing {parsed}")
    preview = subject_erasure_preview(subtree=parsed, principal=principal)
    if preview.is_empty:
        raise SubjectErasureError(
            f"nothing is stored under {parsed} (no record or stored message holds content), "
            "so there is nothing to erase"
        )
    job = record_job(
        kind=Job.Kind.ERASURE,
        scope=str(parsed),
        started_by=access.audit_actor(principal, started_by),
        requested_by_id=principal.user_id,
        total=preview.records + preview.episodes,
        params={"reference": cleaned, "scopes": [row["scope"] for row in preview.scopes]},
    )
    if queue:  # a shell command runs it at once instead (run_subject_erasure)
        from memory.tasks import erasure_job

        queue_after_commit(job, erasure_job)
    return job


def run_subject_erasure(job_id: int) -> Job:
    """Erase what recorded erasure ``job_id`` covers, in this thread (what the task does)."""
    return run_job(job_id, Job.Kind.ERASURE, _erase)


def _erase(job: Job, progress: Progress) -> dict[str, Any]:
    subtree = Scope.parse(job.scope)
    reference = str(job.params.get("reference", ""))
    # Re-read now: a resumed job, or writes since the preview, change what is there.
    scopes = [row["scope"] for row in _per_scope(subtree)]
    receipts: list[dict[str, Any]] = []
    counts: dict[str, dict[str, int]] = {}
    for scope in scopes:
        while True:
            receipt = _erase_chunk(Scope.parse(scope), job, reference)
            if receipt is None:
                break
            receipts.append(receipt)
            tally = counts.setdefault(scope, {"records": 0, "episodes": 0})
            tally["records"] += len(receipt["purged_record_ids"])
            tally["episodes"] += len(receipt["purged_episode_ids"])
            progress.add(len(receipt["purged_record_ids"]) + len(receipt["purged_episode_ids"]))
    removed_files = _erase_copies(subtree)
    closing = _close(job, subtree, reference, receipts)
    certificate = _certificate(job, subtree, reference, receipts, closing)
    body = json.dumps(certificate, indent=2, sort_keys=True).encode()
    name = f"erasure-{job.pk}-{secrets.token_hex(8)}.json"
    directory = exports_dir()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(body)
    return {
        "scopes": counts,
        "records": sum(c["records"] for c in counts.values()),
        "episodes": sum(c["episodes"] for c in counts.values()),
        "receipts": len(receipts),
        "export_files_removed": removed_files,
        "certificate_sha256": certificate["certificate_sha256"],
        "file_name": name,
        "file_sha256": hashlib.sha256(body).hexdigest(),
        "file_bytes": len(body),
    }


@transaction.atomic
def _erase_chunk(scope: Scope, job: Job, reference: str) -> dict[str, Any] | None:
    """Purge up to ``ERASE_CHUNK`` records (any status) and stored messages at ``scope``; the receipt,
    or ``None`` when nothing there holds content any more."""
    lock_subject(str(scope))
    records = list(
        Record.objects.filter(scope=str(scope))
        .exclude(status=Status.TOMBSTONED)
        .select_for_update()
        .order_by("id")[:ERASE_CHUNK]
    )
    episodes = list(
        Episode.objects.filter(scope=str(scope), purged_at__isnull=True)
        .order_by("id")
        .values_list("episode_id", "text")[:ERASE_CHUNK]
    )
    if not records and not episodes:
        return None
    # The selector of an erasure is the subtree it covers; the reference stays
    # out of the chain as text (it may name the person) and is committed by digest
    # (the certificate carries the text, not each receipt row).
    return purge_with_receipt(
        scope,
        records,
        [episode_id for episode_id, _ in episodes],
        episode_texts=[text for _, text in episodes],
        now=timezone.now(),
        actor=job.started_by,
        mode="erase_subject",
        selector_sha256=sha256_text(f"erase-subject {job.scope}"),
        details={"reference_sha256": sha256_text(reference), "erasure_job": job.pk},
    )


@transaction.atomic
def _erase_copies(subtree: Scope) -> int:
    """Clear what outlives the records elsewhere: stored recall queries anywhere in the subtree,
    export files of its scopes, and (through :mod:`aetnaweb.purges`) webhook delivery bodies."""
    RetrievalEvent.objects.filter(**subtree.subtree_filter()).exclude(query_text="").update(
        query_text=""
    )
    removed = 0
    # Earlier erasure certificates stay: they hold IDs and digests only, and are the proof.
    files = Job.objects.filter(file_name__gt="", file_removed_at__isnull=True).exclude(
        kind=Job.Kind.ERASURE
    )
    for job in files.exclude(scope__isnull=True).only("pk", "scope", "file_name"):
        if _covered(subtree, job.scope):
            removed += int(remove_file(job))
    purges.announce_erasure(purges.ErasedSubtree(str(subtree)))
    return removed


def _covered(subtree: Scope, scope: str | None) -> bool:
    try:
        return scope is not None and subtree.covers(Scope.parse(scope))
    except ValueError:
        return False


@transaction.atomic
def _close(
    job: Job, subtree: Scope, reference: str, receipts: list[dict[str, Any]]
) -> dict[str, Any]:
    """Record in the subtree's own chain which receipts make up the erasure; its log proof.

    The certificate's own digest is unkeyed: without this event a holder could
    drop a receipt and recompute it. The event commits the set of receipt
    digests, and its inclusion proof under the signed checkpoint lets a
    verifier check offline that the certificate lists exactly that set.
    """
    lock_subject(str(subtree))
    event = _audit(
        scope=subtree,
        event_type="memory.subject_erased",
        actor=job.started_by,
        payload={
            "erasure_job": job.pk,
            "reference_sha256": sha256_text(reference),
            "receipt_sha256s": sorted(r["receipt_sha256"] for r in receipts),
            "purged_record_count": sum(len(r["purged_record_ids"]) for r in receipts),
            "purged_episode_count": sum(len(r["purged_episode_ids"]) for r in receipts),
        },
    )
    return log_proof_for(event)


def _certificate(
    job: Job,
    subtree: Scope,
    reference: str,
    receipts: Iterable[dict[str, Any]],
    closing: dict[str, Any],
) -> dict[str, Any]:
    certificate: dict[str, Any] = {
        "format": ERASURE_CERTIFICATE_FORMAT,
        "subtree": str(subtree),
        "reference": reference,
        "erasure_job": job.pk,
        "requested_at": job.started_at.isoformat(),
        "created_at": timezone.now().isoformat(),
        "receipts": list(receipts),
        "closing_proof": closing,
    }
    certificate["certificate_sha256"] = digest(certificate)
    return certificate


def erasure_certificate(*, job_id: int, principal: Principal) -> dict[str, Any]:
    """The certificate a finished erasure wrote; admins of its subtree only."""
    job = Job.objects.filter(pk=job_id, kind=Job.Kind.ERASURE).first()
    if job is None or not job.scope or not access.may_erase_subject(principal, job.scope):
        raise AccessDenied(f"no erasure {job_id} that {principal.label} may read")
    if not job.has_file:
        raise SubjectErasureError(
            f"erasure {job_id} has no certificate ({job.get_status_display().lower()})"
        )
    document: dict[str, Any] = json.loads((exports_dir() / job.file_name).read_text())
    return document
