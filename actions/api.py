"""HTTP endpoints for guarded actions, under ``/api/v1/actions/``.

An agent stages an exact plan, reads it back, lists its plans and verifies
them. There is deliberately no endpoint to approve, deny, commit, abort,
recover or purge: those stay with people in the dashboard (decision 5), and
no token can hold the ``approve`` capability anyway.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import NinjaAPI, Query, Router, Status

from actions import selectors, services
from actions.api_schemas import (
    StageIn,
    TransactionsOut,
    TransactionsQuery,
    VerificationOut,
    WorldPatchOut,
)
from actions.errors import (
    ActionInputError,
    ActionPolicyViolation,
    AdapterNotRegistered,
)
from aetnaweb import access
from aetnaweb.api import (
    ERROR_RESPONSES,
    may_refuse,
    not_found,
    principal_of,
    refusals_about,
    require,
    require_capability,
)

router = Router(tags=["actions"])

MAX_TRANSACTION_ID = 64


@router.post(
    "/stage",
    response={201: WorldPatchOut, **ERROR_RESPONSES},
    summary="Stage an exact plan (a world patch) for a person to approve",
)
@may_refuse(ActionInputError, ActionPolicyViolation, AdapterNotRegistered)
def stage(request: HttpRequest, payload: StageIn) -> Status[dict[str, Any]]:
    """Record an exact, hashed plan at ``scope`` (capability ``stage``).

    In ``enforce`` mode it waits for a person's approval in the dashboard;
    ``observe`` and ``preview`` plans can never execute. Nothing is written
    unless every operation prepares and passes the guard policy.
    """
    require(request, access.STAGE, payload.scope)
    with refusals_about("operations"):
        return Status(
            201,
            services.stage(
                scope=payload.scope,
                operations=[operation.model_dump() for operation in payload.operations],
                mode=payload.mode,
                session_id=payload.session_id,
                turn_id=payload.turn_id,
                principal=principal_of(request),
            ).as_dict(),
        )


@router.get(
    "",
    response={200: TransactionsOut, **ERROR_RESPONSES},
    summary="List the guarded-action transactions the token may read, newest first",
)
@may_refuse(ActionInputError)
def list_transactions(request: HttpRequest, params: Query[TransactionsQuery]) -> dict[str, Any]:
    """Transactions inside the token's subtree (or ``scope``), optionally in some states;
    pass ``next_cursor`` back as ``after`` for the next page. Capability ``read``."""
    if params.scope is not None:
        require(request, access.READ, params.scope)
    else:
        require_capability(request, access.READ)
    page = selectors.list_transactions(
        principal_of(request),
        scope=params.scope,
        states=params.state,
        after=params.after,
        limit=params.limit,
    )
    # next_after is the pre-1.1 name of next_cursor, kept for older clients.
    return {"items": page.items, "next_cursor": page.next_after, "next_after": page.next_after}


@router.get(
    "/{transaction_id}",
    response={200: dict[str, Any], **ERROR_RESPONSES},
    summary="One transaction: operations with previews, evidence, approvals, attempts, receipt",
)
@may_refuse()
def show_transaction(request: HttpRequest, transaction_id: str) -> dict[str, Any]:
    """A transaction the token may read (capability ``read``); any other ID is a 404."""
    require_capability(request, access.READ)
    if len(transaction_id) > MAX_TRANSACTION_ID:
        raise not_found()
    # AccessDenied (any other token's transaction) answers 404 not_found.
    return selectors.transaction_detail(principal_of(request), transaction_id).as_dict()


@router.get(
    "/{transaction_id}/verify",
    response={200: VerificationOut, **ERROR_RESPONSES},
    summary="Verify a transaction: plan hash, approvals, receipts and the scope's chain",
)
@may_refuse()
def verify_transaction(request: HttpRequest, transaction_id: str) -> dict[str, Any]:
    """The V-1 verification of one transaction (capability ``audit``); read-only."""
    require_capability(request, access.AUDIT)
    if len(transaction_id) > MAX_TRANSACTION_ID:
        raise not_found()
    # TransactionNotFound and AccessDenied both answer 404 not_found, alike.
    return services.verify(transaction_id=transaction_id, principal=principal_of(request)).as_dict()


def mount(api: NinjaAPI) -> None:
    # Refusals answer through the kernel's one DomainError handler (aetnaweb/api.py).
    api.add_router("/actions/", router)
