"""Reads of the webhooks app, limited to what the operator administers."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from aetnaweb.access import Principal, administered_scopes
from webhooks.models import WebhookDelivery, WebhookEndpoint

DELIVERIES_PER_PAGE = 50


def _administered_q(principal: Principal, prefix: str = "") -> Q | None:
    """None: everything; otherwise a filter for endpoints in the administered subtrees."""
    if principal.is_system:
        return None
    q = Q(pk__in=[])
    for granted in administered_scopes(principal):
        lookups = granted.subtree_filter(f"{prefix}scope_")
        if not lookups:  # an admin of platform:*:* manages every endpoint
            return None
        q |= Q(**lookups)
    return q


def endpoints_administered(principal: Principal) -> QuerySet[WebhookEndpoint]:
    """Endpoints whose scope lies in a subtree ``principal`` administers, newest first."""
    q = _administered_q(principal)
    rows = WebhookEndpoint.objects.all()
    return rows if q is None else rows.filter(q)


def endpoint_for(principal: Principal, endpoint_id: str) -> WebhookEndpoint | None:
    return endpoints_administered(principal).filter(pk=endpoint_id).first()


def deliveries_page(
    endpoint: WebhookEndpoint,
    *,
    before: tuple[str, str] | None = None,
    status: str | None = None,
) -> tuple[list[WebhookDelivery], tuple[str, str] | None]:
    """One page of the endpoint's deliveries, newest first, keyed by (created_at, id).

    ``status`` (one of :class:`WebhookDelivery.Status`) keeps only deliveries in that state.
    """
    rows = endpoint.deliveries.order_by("-created_at", "-id")
    if status:
        rows = rows.filter(status=status)
    if before is not None:
        created, delivery_id = before
        rows = rows.filter(Q(created_at__lt=created) | Q(created_at=created, id__lt=delivery_id))
    page = list(rows[: DELIVERIES_PER_PAGE + 1])
    more = len(page) > DELIVERIES_PER_PAGE
    page = page[:DELIVERIES_PER_PAGE]
    cursor = (page[-1].created_at.isoformat(), page[-1].id) if more and page else None
    return page, cursor


def status_counts(endpoint_ids: list[str]) -> dict[str, dict[str, int]]:
    """Deliveries per status for each endpoint (one grouped query)."""
    counts: dict[str, dict[str, int]] = {}
    rows = (
        WebhookDelivery.objects.filter(endpoint_id__in=endpoint_ids)
        .values("endpoint_id", "status")
        .annotate(n=Count("id"))
    )
    for row in rows:
        counts.setdefault(row["endpoint_id"], {})[row["status"]] = row["n"]
    return counts
