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


@dataclass
class Overview:
    tenants: list[TenantRow]
    chart: BarChart
    totals: dict[str, int]
    latest_checkpoint: Checkpoint | None
    has_grants: bool
    can_audit: bool
    failed: list[TenantRow]
    # What the principal's own roles let them act on, beside what awaits anyone.
    awaiting_you: dict[str, int]


def events_per_day_chart(principal: Principal, *, today: date | None = None) -> BarChart:
    """Audit events per UTC day over the last 30 days, for the chains the principal may read."""
    counts = audit_selectors.daily_counts(principal, days=CHART_DAYS, today=today)
    points = [(day.strftime("%a %d %b %Y"), day.strftime("%d %b"), total) for day, total in counts]
    first, last = counts[0][0], counts[-1][0]
    return bar_chart(points, title=f"Audit events per day, {first:%d %b} to {last:%d %b %Y} (UTC)")


def build_overview(principal: Principal, *, user: Any) -> Overview:
    """Everything the overview page shows, for one principal (a bounded number of queries)."""
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
    for row in ordered:
        row.chain = statuses[row.tenant]
        row.last_checkpoint = checkpoints[row.tenant]
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
        failed=[row for row in ordered if row.chain.state == "failed"],
        awaiting_you={
            "quarantined": memory_selectors.quarantined_awaiting(principal),
            "pending_approvals": action_selectors.approvals_awaiting(principal),
        },
    )
