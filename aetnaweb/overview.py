"""The dashboard's overview, composed from the apps' selectors (a composition module).

Nothing here writes. Every number comes from a selector that applies the
principal's grants (``memory.selectors.counts_by_tenant``,
``actions.selectors.counts_by_tenant``, the audit subject index and daily
counts); the verification and checkpoint summaries come from
``audit.status``, already narrowed to what the principal may read. The apps
never import this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from access.models import ScopeGrant
from actions import selectors as action_selectors
from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.dashboard import BarChart, bar_chart
from aetnaweb.scopes import PLATFORM, Scope
from audit import selectors as audit_selectors
from audit.models import Checkpoint
from audit.status import (
    NEVER_VERIFIED,
    ChainStatus,
    chain_status_by_tenant,
    latest_checkpoint_by_tenant,
    visible_tenants,
)
from memory import selectors as memory_selectors

CHART_DAYS = 30

# The overview's activity charts (issue 33 item 5): a title and the audit event
# types each counts, read per tenant from the chains (audit.selectors.daily_type_counts).
ACTIVITY_SERIES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("writes", "Records written", "records", ("memory.record_created",)),
    ("quarantined", "Quarantine inflow", "facts", ("memory.record_quarantined",)),
    (
        "decisions",
        "Quarantine decisions (promoted or rejected)",
        "decisions",
        ("memory.record_promoted", "memory.record_rejected"),
    ),
    ("approvals", "Approvals of guarded actions", "approvals", ("action.approved",)),
    ("recalls", "Recalls", "recalls", ("memory.recall",)),
    ("forgets", "Forgets", "forgets", ("memory.forget",)),
)


# -- the overview ----------------------------------------------------------------------


@dataclass
class TenantRow:
    tenant: str
    roles: list[tuple[str, str]] = field(default_factory=list)  # (scope, role) granted in it
    active: int = 0
    quarantined: int = 0
    pending_approvals: int = 0
    uncertain: int = 0
    recovery_required: int = 0
    chain: ChainStatus = NEVER_VERIFIED
    last_checkpoint: Checkpoint | None = None
    # Where the quarantined count links: the queue narrowed to the tenant ("scope"), the
    # whole queue when only part of the tenant is reviewable ("queue"), or nowhere (None):
    # a link must not lead a person without the reviewer role to a 404.
    review_link: str | None = None

    @property
    def is_platform(self) -> bool:
        return self.tenant == PLATFORM

    @property
    def scope(self) -> str:
        return str(Scope.platform() if self.is_platform else Scope.of(self.tenant))

    @property
    def needs_attention(self) -> bool:
        return bool(
            self.quarantined
            or self.pending_approvals
            or self.uncertain
            or self.recovery_required
            or self.chain.state in {"failed", "error", "inconclusive"}
        )


@dataclass(frozen=True)
class ActivityChart:
    slug: str  # unique on the page: the chart's element ids derive from it
    label: str  # the short heading above it ("Recalls"); the chart's own title is in full
    chart: BarChart


@dataclass(frozen=True)
class TenantActivity:
    """One tenant's daily activity charts; ``tenants`` are the others one may switch to."""

    tenant: str
    tenants: list[str]
    charts: list[ActivityChart]
    # What the ?tenant= asked for when it is not one of the principal's tenants.
    unknown: str | None = None


def tenant_activity(
    principal: Principal,
    tenants: list[str],
    *,
    wanted: str | None = None,
    today: date | None = None,
) -> TenantActivity | None:
    """Daily charts for ``wanted`` (one of ``tenants``; else the first) over the last 30 days.

    One grouped query for the six series; ``None`` when no tenant is visible.
    """
    if not tenants:
        return None
    tenant = wanted if wanted in tenants else tenants[0]
    types = [kind for *_, kinds in ACTIVITY_SERIES for kind in kinds]
    counts = audit_selectors.daily_type_counts(
        principal, event_types=types, tenant=tenant, days=CHART_DAYS, today=today
    )
    charts = []
    for slug, title, unit, kinds in ACTIVITY_SERIES:
        per_day = [
            (day, sum(counts[kind][index][1] for kind in kinds))
            for index, (day, _) in enumerate(counts[kinds[0]])
        ]
        points = [(day.strftime("%a %d %b %Y"), day.strftime("%d %b"), n) for day, n in per_day]
        first, last = per_day[0][0], per_day[-1][0]
        charts.append(
            ActivityChart(
                slug=slug,
                label=title,
                chart=bar_chart(
                    points,
                    title=f"{title} per day in {tenant}, {first:%d %b} to {last:%d %b %Y} (UTC)",
                    y_label=unit,
                    width=420,
                    height=180,
                    label_every=7,
                ),
            )
        )
    unknown = wanted if wanted and wanted != tenant else None
    return TenantActivity(tenant=tenant, tenants=tenants, charts=charts, unknown=unknown)


@dataclass
class Overview:
    tenants: list[TenantRow]
    chart: BarChart
    totals: dict[str, int]
    latest_checkpoint: Checkpoint | None
    has_grants: bool
    can_audit: bool
    can_approve: bool
    failed: list[TenantRow]
    # What the principal's own roles let them act on, beside what awaits anyone.
    awaiting_you: dict[str, int]
    activity: TenantActivity | None = None

    @property
    def verified_any(self) -> bool:
        """Whether any visible tenant's chains have been verified at least once."""
        return any(row.chain.state in ("passed", "failed") for row in self.tenants)


def events_per_day_chart(principal: Principal, *, today: date | None = None) -> BarChart:
    """Audit events per UTC day over the last 30 days, for the chains the principal may read."""
    counts = audit_selectors.daily_counts(principal, days=CHART_DAYS, today=today)
    points = [(day.strftime("%a %d %b %Y"), day.strftime("%d %b"), total) for day, total in counts]
    first, last = counts[0][0], counts[-1][0]
    return bar_chart(points, title=f"Audit events per day, {first:%d %b} to {last:%d %b %Y} (UTC)")


def _review_link(principal: Principal, row: TenantRow, reviewable: list[Scope]) -> str | None:
    if access.may(principal, access.REVIEW, row.scope):
        return "scope"
    if any(Scope.parse(row.scope).covers(granted) for granted in reviewable):
        return "queue"
    return None


def build_overview(
    principal: Principal, *, user: Any, activity_tenant: str | None = None
) -> Overview:
    """Everything the overview page shows, for one principal (a bounded number of queries).

    ``activity_tenant`` picks whose daily activity charts are drawn (the first
    visible tenant when it is not one of theirs).
    """
    tenants = visible_tenants(principal)
    rows = {tenant: TenantRow(tenant=tenant) for tenant in tenants}
    for scope, role in (
        ScopeGrant.objects.filter(user=user).order_by("scope", "role").values_list("scope", "role")
    ):
        tenant = scope.split(":", 1)[0]
        if tenant in rows:
            rows[tenant].roles.append((scope, role))
    for entry in memory_selectors.counts_by_tenant(principal):
        row = rows.setdefault(entry["tenant"], TenantRow(tenant=entry["tenant"]))
        row.active, row.quarantined = entry["active"], entry["quarantined"]
    for tenant, counts in action_selectors.counts_by_tenant(principal).items():
        row = rows.setdefault(tenant, TenantRow(tenant=tenant))
        row.pending_approvals = counts.get("pending_approvals", 0)
        row.uncertain = counts.get("uncertain", 0)
        row.recovery_required = counts.get("recovery_required", 0)
    ordered = [rows[t] for t in sorted(rows, key=lambda t: (t != PLATFORM, t))]
    statuses = chain_status_by_tenant(principal, [row.tenant for row in ordered])
    checkpoints = latest_checkpoint_by_tenant([row.tenant for row in ordered])
    reviewable = access.granted_scopes(principal, access.REVIEW)
    for row in ordered:
        row.chain = statuses[row.tenant]
        row.last_checkpoint = checkpoints[row.tenant]
        row.review_link = _review_link(principal, row, reviewable)
    totals = {
        name: sum(getattr(row, name) for row in ordered)
        for name in ("active", "quarantined", "pending_approvals", "uncertain", "recovery_required")
    }
    pinned = [row.last_checkpoint for row in ordered if row.last_checkpoint is not None]
    return Overview(
        tenants=ordered,
        chart=events_per_day_chart(principal),
        totals=totals,
        latest_checkpoint=max(pinned, key=lambda cp: (cp.created_at, cp.pk)) if pinned else None,
        has_grants=bool(principal.bindings),
        can_audit=access.has_capability_anywhere(principal, access.AUDIT),
        can_approve=access.has_capability_anywhere(principal, access.APPROVE),
        failed=[row for row in ordered if row.chain.state == "failed"],
        awaiting_you={
            "quarantined": memory_selectors.quarantined_awaiting(principal),
            "pending_approvals": action_selectors.approvals_awaiting(principal),
        },
        activity=tenant_activity(
            principal, [row.tenant for row in ordered], wanted=activity_tenant
        ),
    )
