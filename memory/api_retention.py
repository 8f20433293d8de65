"""Retention policies of memory content over HTTP (see :mod:`memory.services.retention`).

``GET /api/v1/memory/retention-policies?scope=S`` lists the policies over or
inside ``S``; ``POST /api/v1/memory/retention-policies`` sets one (201) and
``POST /api/v1/memory/retention-policies/remove`` removes one. Setting and
removing are admin-level acts on the subtree: the service checks it. The
purge itself is the scheduled ``manage.py retention run``.
"""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema, Status
from pydantic import Field

from aetnaweb import access
from aetnaweb.api import (
    ERROR_RESPONSES,
    BodyIn,
    may_refuse,
    principal_of,
    refusals_about,
    require,
)
from memory.api_schemas import ScopeStr
from memory.errors import RetentionPolicyError
from memory.services.retention import (
    MAX_KEEP_DAYS,
    remove_retention_policy,
    retention_policies,
    set_retention_policy,
)

Target = Literal["episodes", "quarantined", "records"]


class RetentionPolicyIn(BodyIn):
    model_config = {
        "json_schema_extra": {
            "examples": [{"scope": "acme:alice:*", "target": "episodes", "keep_days": 30}]
        }
    }

    scope: ScopeStr = Field(..., description="The subtree it applies to, e.g. acme:alice:*")
    target: Target = Field(
        ...,
        description="episodes (stored messages' text), quarantined (unpromoted third-party "
        "facts) or records (every record, by lineage)",
    )
    keep_days: int = Field(..., ge=1, le=MAX_KEEP_DAYS, description="Whole days to keep it")


class RetentionPolicyRemoveIn(BodyIn):
    scope: ScopeStr
    target: Target


class RetentionPolicyOut(Schema):
    policy_id: str
    scope: str
    target: str
    keep_days: int
    set_by: str
    set_at: str
    audit_event_id: str


class RetentionPolicyListOut(Schema):
    items: list[dict[str, Any]]


class RetentionPolicyQuery(Schema):
    scope: ScopeStr


def add_routes(router: Router) -> None:
    """Mounted by :func:`memory.api.mount` on the memory router."""

    @router.get(
        "/retention-policies",
        response={200: RetentionPolicyListOut, **ERROR_RESPONSES},
        summary="Retention policies over a scope or inside it",
    )
    @may_refuse()
    def list_retention_policies(
        request: HttpRequest, params: Query[RetentionPolicyQuery]
    ) -> dict[str, Any]:
        """Each policy that applies at ``scope`` or below it, with its last run (``read``)."""
        require(request, access.READ, params.scope)
        policies = retention_policies(principal=principal_of(request), scope=params.scope)
        return {
            "items": [
                {
                    "policy_id": p.policy_id,
                    "scope": p.scope,
                    "target": p.target,
                    "keep_days": p.keep_days,
                    "set_by": p.set_by,
                    "set_at": p.set_at.isoformat(),
                    "last_run_at": p.last_run_at.isoformat() if p.last_run_at else None,
                    "last_run_records": p.last_run_records,
                    "last_run_episodes": p.last_run_episodes,
                }
                for p in policies
            ]
        }

    @router.post(
        "/retention-policies",
        response={201: RetentionPolicyOut, **ERROR_RESPONSES},
        summary="Keep one kind of content at a subtree for a number of days",
    )
    @may_refuse(RetentionPolicyError)
    def create_retention_policy(
        request: HttpRequest, payload: RetentionPolicyIn
    ) -> Status[dict[str, Any]]:
        """Setting it again replaces the keep; the next retention run purges what lapsed,
        with deletion receipts (admins of the subtree)."""
        require(request, access.READ, payload.scope)
        with refusals_about("scope", RetentionPolicyError="target"):
            result = set_retention_policy(
                scope=payload.scope,
                target=payload.target,
                keep_days=payload.keep_days,
                principal=principal_of(request),
            )
        return Status(201, result.as_dict())

    @router.post(
        "/retention-policies/remove",
        response={200: RetentionPolicyOut, **ERROR_RESPONSES},
        summary="Remove a retention policy: that content is kept until forgotten",
    )
    @may_refuse(RetentionPolicyError)
    def remove_policy(request: HttpRequest, payload: RetentionPolicyRemoveIn) -> dict[str, Any]:
        """The removal is audited (admins of the subtree)."""
        require(request, access.READ, payload.scope)
        with refusals_about("scope", RetentionPolicyError="target"):
            result = remove_retention_policy(
                scope=payload.scope, target=payload.target, principal=principal_of(request)
            )
        return result.as_dict()
