"""What the audit layer says about chains and checkpoints, narrowed to one principal.

The dashboard's overview and the audit pages both show these summaries; they
live here, with the evidence they read, so that the audit app never has to
import the layers above it (design.md: audit imports neither memory nor
actions). A failure in a chain outside the principal's grants is neither shown
nor counted against their tenant, and a checkpoint is offered for download
only to someone who may audit every chain it pins (its subject list would
otherwise reveal other tenants).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.scopes import PLATFORM, Scope
from audit.models import AuditSubject, Checkpoint, VerificationRun
from audit.selectors import readable
from audit.services import MAX_RECORDED_FAILURES

RECENT_RUNS = 200  # verification runs scanned for the per-tenant status (newest first)
RECENT_CHECKPOINTS = 20  # checkpoints scanned for each tenant's latest pin


# -- visibility of subjects ------------------------------------------------------------


def visible_tenants(principal: Principal) -> list[str]:
    """Tenants with anything the principal may read, plus the tenants they are granted.

    ``platform`` (the shared root) is listed when something is stored there.
    """
    tenants = {scope.tenant for scope, _ in principal.bindings if not scope.is_platform}
    tenants.update(
        AuditSubject.objects.filter(
            access.scope_q(principal, access.READ, canonical_field="subject_id")
        )
        .order_by("tenant")
        .values_list("tenant", flat=True)
        .distinct()
    )
    return sorted(tenants, key=lambda tenant: (tenant != PLATFORM, tenant))


# -- verification status ---------------------------------------------------------------


@dataclass(frozen=True)
class ChainStatus:
    """What the latest verification run says about one tenant's chains, for this principal."""

    state: str  # passed, failed, running, error, inconclusive, never
    run: VerificationRun | None = None
    first_bad_sequence: int | None = None
    failed_subjects: tuple[str, ...] = ()
    running: VerificationRun | None = None  # a newer run still in progress

    @property
    def scope_label(self) -> str:
        if self.run is None:
            return ""
        return self.run.scope or "every chain"

    @property
    def checked_at(self) -> datetime | None:
        return self.run.finished_at if self.run else None


NEVER_VERIFIED = ChainStatus("never")


def status_from_run(
    run: VerificationRun, principal: Principal, *, tenant: str | None = None
) -> ChainStatus:
    """A finished run's verdict restricted to the chains the principal may read (and ``tenant``).

    A run that failed only outside the principal's reach counts as passed for
    them; when its failure list was cut short (more than the recorded cap) the
    verdict for the rest is ``inconclusive``, never a guess.
    """
    if run.status == VerificationRun.Status.PASSED:
        return ChainStatus("passed", run)
    if run.status == VerificationRun.Status.ERROR:
        return ChainStatus("error", run)
    mine = []
    for failure in run.failures or []:
        subject = failure.get("subject_id") if isinstance(failure, dict) else None
        if not isinstance(subject, str) or not readable(principal, subject):
            continue
        if tenant is not None and subject.split(":", 1)[0] != tenant:
            continue
        mine.append(failure)
    if mine:
        bad = [f["first_bad_sequence"] for f in mine if f.get("first_bad_sequence") is not None]
        return ChainStatus(
            "failed",
            run,
            first_bad_sequence=min(bad) if bad else None,
            failed_subjects=tuple(str(f["subject_id"]) for f in mine),
        )
    if len(run.failures or []) >= MAX_RECORDED_FAILURES:
        return ChainStatus("inconclusive", run)
    return ChainStatus("passed", run)


def _run_applies(run: VerificationRun, tenant: str, principal: Principal) -> bool:
    if run.tenant is None:  # every chain: it covers this tenant
        return True
    return run.tenant == tenant and run.scope is not None and readable(principal, run.scope)


def chain_status_by_tenant(principal: Principal, tenants: Iterable[str]) -> dict[str, ChainStatus]:
    """The latest run covering each tenant (one bounded query over recent runs)."""
    tenants = list(tenants)
    runs = list(
        VerificationRun.objects.filter(Q(tenant__in=tenants) | Q(tenant__isnull=True)).order_by(
            "-started_at", "-id"
        )[:RECENT_RUNS]
    )
    result: dict[str, ChainStatus] = {}
    for tenant in tenants:
        running = None
        status = ChainStatus("never")
        for run in runs:
            if not _run_applies(run, tenant, principal):
                continue
            if run.is_running and not run.is_stale:
                running = running or run
                continue
            if run.is_running:  # stale: the process died; it proves nothing
                continue
            status = status_from_run(run, principal, tenant=tenant)
            break
        result[tenant] = ChainStatus(
            status.state,
            status.run,
            status.first_bad_sequence,
            status.failed_subjects,
            running=running,
        )
    return result


# -- checkpoints -----------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointCoverage:
    """The chains one checkpoint pins, summarized for visibility checks."""

    subjects: tuple[str, ...]
    tenants: frozenset[str]


_COVERAGE_CACHE: dict[str, CheckpointCoverage] = {}
COVERAGE_CACHE_SIZE = 256


def checkpoint_coverage(checkpoint: Checkpoint) -> CheckpointCoverage:
    """The chains a checkpoint pins, parsed once per process and cached by its digest.

    Documents never change, so the digest is a safe key; querysets may
    ``defer("document")`` (a checkpoint of 10,000 chains is about a megabyte)
    and the text is then loaded only on a cache miss.
    """
    key = checkpoint.checkpoint_sha256
    cached = _COVERAGE_CACHE.get(key)
    if cached is not None:
        return cached
    try:
        subjects = tuple(sorted(json.loads(checkpoint.document).get("subjects", {})))
    except (ValueError, AttributeError):
        subjects = ()
    coverage = CheckpointCoverage(
        subjects=subjects, tenants=frozenset(subject.split(":", 1)[0] for subject in subjects)
    )
    if len(_COVERAGE_CACHE) >= COVERAGE_CACHE_SIZE:
        _COVERAGE_CACHE.pop(next(iter(_COVERAGE_CACHE)), None)
    _COVERAGE_CACHE[key] = coverage
    return coverage


def may_see_checkpoint(principal: Principal, checkpoint: Checkpoint) -> bool:
    """True when the principal may audit every chain the checkpoint pins.

    A checkpoint lists its subjects; showing one that pins chains outside the
    principal's grants would reveal those scopes.
    """
    if principal.is_system or access.may(principal, access.AUDIT, Scope.platform()):
        return True
    if not access.has_capability_anywhere(principal, access.AUDIT):
        return False
    coverage = checkpoint_coverage(checkpoint)
    whole_tenants = {
        scope.tenant
        for scope, caps in principal.bindings
        if access.AUDIT in caps and scope.depth == 1
    }
    return all(
        subject.split(":", 1)[0] in whole_tenants or readable(principal, subject, access.AUDIT)
        for subject in coverage.subjects
    )


def latest_checkpoint_by_tenant(tenants: Iterable[str]) -> dict[str, Checkpoint | None]:
    """For each tenant, the newest recent checkpoint pinning any of its chains.

    Its age is what the overview shows; the checkpoint's content is not, so a
    checkpoint that also pins other tenants may be counted here.
    """
    recent = list(
        Checkpoint.objects.defer("document").order_by("-created_at", "-id")[:RECENT_CHECKPOINTS]
    )
    result: dict[str, Checkpoint | None] = {}
    for tenant in tenants:
        result[tenant] = next(
            (cp for cp in recent if tenant in checkpoint_coverage(cp).tenants), None
        )
    return result
