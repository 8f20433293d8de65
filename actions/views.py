"""The guarded-actions pages of the operator dashboard (issue 5, item 8).

- ``/actions/``: plans awaiting approval on scopes where you hold the approver role;
- ``/actions/attention/``: uncertain and recovery-required transactions, with what to check,
  and runs that stopped mid-commit (the ones to recover);
- ``/actions/history/``: every transaction you may see, filtered, paginated by key;
- ``/actions/<id>/``: one plan: the exact plan and plan hash, each operation's preview (a diff
  for a file write), evidence split into "authorized by" and "informed by", approvals and
  their expiry, attempts, the receipt with download and verify; the decision forms.

Every POST goes through :mod:`actions.services` with the signed-in operator's
principal, which checks the approver role on the plan's scope (and separation
of duties) again; before that, :func:`actions.selectors.visible_transaction`
turns anything outside the operator's grants, or a role without the
capability, into a 404. A refusal by the engine re-renders the page with its
message (409, or 400 for bad input); success redirects back to the plan.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from actions import formats, selectors, services
from actions.approvals import configured_authority
from actions.errors import (
    ActionError,
    ActionInputError,
    ApprovalUnavailable,
    TransactionNotFound,
)
from actions.forms import (
    TRANSACTION_ID,
    AbortForm,
    DenyForm,
    HistoryFilterForm,
    PurgeForm,
    ResolutionForm,
)
from aetnaweb import access
from aetnaweb.access import Principal
from aetnaweb.dashboard import (
    dashboard_view,
    invalid_scope_response,
    is_missing,
    page_size,
    principal_for,
    render_page,
)
from aetnaweb.errors import DomainError
from aetnaweb.scopes import Scope, ScopeError
from audit.canonical import canonical_json

DETAIL = "actions/detail.html"


def _checked_id(transaction_id: str) -> str:
    # Anything that is not a transaction ID cannot exist: the same 404 as out of reach.
    if not TRANSACTION_ID.match(transaction_id):
        raise Http404("not found")
    return transaction_id


def _approval_status() -> dict[str, Any]:
    """Whether the server can sign approvals, and if not, how to configure it (decision 6)."""
    try:
        authority = configured_authority(required=True)
    except ApprovalUnavailable as exc:
        return {"enabled": False, "message": str(exc), "ttl_minutes": None}
    ttl = authority.ttl_seconds if authority is not None else 0
    return {"enabled": True, "message": "", "ttl_minutes": max(1, ttl // 60)}


def _detail_context(
    principal: Principal,
    transaction_id: str,
    *,
    deny_form: DenyForm | None = None,
    abort_form: AbortForm | None = None,
    resolution_form: ResolutionForm | None = None,
    error: str = "",
    verification: dict[str, Any] | None = None,
) -> dict[str, Any]:
    detail = selectors.transaction_detail(principal, transaction_id)
    txn = detail.transaction
    approvals = detail.approvals
    return {
        "detail": detail,
        "txn": txn,
        "operations": detail.operations,
        "perm": detail.permissions,
        "approval_status": _approval_status(),
        "latest_approval": approvals[-1] if approvals else None,
        "deny_form": deny_form or DenyForm(),
        "abort_form": abort_form or AbortForm(),
        "resolution_form": resolution_form or ResolutionForm(initial={"owner": principal.label}),
        "error": error,
        "verification": verification,
        "receipt": detail.receipt,
        "is_interrupted": txn["state"] in formats.INTERRUPTED_STATES,
    }


def _refused(
    request: HttpRequest, principal: Principal, transaction_id: str, exc: Exception, **forms: Any
) -> HttpResponse:
    """The plan page again, saying why the engine refused (nothing was written).

    A transaction that does not exist (or is out of reach) is the decorator's
    404 instead: there is no plan page to show again.
    """
    if isinstance(exc, DomainError) and is_missing(exc):
        raise Http404("not found") from exc
    # The plan page keeps its own statuses: 400 for a malformed input, 409 for
    # everything the plan's state or policy refuses (the page shows why).
    status = 400 if isinstance(exc, ActionInputError) else 409
    context = _detail_context(principal, transaction_id, error=str(exc), **forms)
    return render(request, DETAIL, context, status=status)


def _attention_count(principal: Principal) -> int:
    counts = selectors.counts_by_tenant(principal)
    return sum(bucket["uncertain"] + bucket["recovery_required"] for bucket in counts.values())


# -- pages ------------------------------------------------------------------------------


@require_GET
@dashboard_view
def index(request: HttpRequest) -> HttpResponse:
    """Plans awaiting approval on the scopes where the operator may approve."""
    principal = principal_for(request)
    queue = selectors.approval_queue(principal)
    context = {
        "queue": queue,
        "attention_count": _attention_count(principal),
        "approval_status": _approval_status(),
        "approves_somewhere": access.has_capability_anywhere(principal, access.APPROVE),
        "tab": "queue",
    }
    return render(request, "actions/index.html", context)


@require_GET
@dashboard_view
def attention(request: HttpRequest) -> HttpResponse:
    """Uncertain and recovery-required transactions (open, resolved or all), and runs that
    stopped mid-commit."""
    principal = principal_for(request)
    resolved = request.GET.get("resolved", "open")
    if resolved not in selectors.RESOLVED_FILTERS:
        resolved = "open"  # an unknown filter shows the default list, and the tabs say which
    try:
        within = Scope.parse(request.GET["scope"]) if request.GET.get("scope") else None
    except ScopeError as exc:
        return invalid_scope_response(request, exc)
    items = selectors.attention_queue(principal, resolved=resolved, within=within)
    interrupted = selectors.list_transactions(
        principal, states=formats.INTERRUPTED_STATES, limit=selectors.MAX_PAGE
    ).items
    for item in interrupted:
        item["may_recover"] = access.may(principal, access.APPROVE, item["subject_id"])
    context = {
        "items": items,
        "interrupted": interrupted,
        "tab": "attention",
        "resolved": resolved,
        "within": str(within) if within else "",
        "filters": [("open", "Open"), ("resolved", "Resolved"), ("all", "All")],
    }
    return render(request, "actions/attention.html", context)


@require_GET
@dashboard_view
def history(request: HttpRequest) -> HttpResponse:
    """Every transaction the operator may see, newest first, by scope subtree and state."""
    principal = principal_for(request)
    form = HistoryFilterForm(request.GET or None)
    page = None
    status = 200
    if form.is_bound and not form.is_valid():
        status = 400
    else:
        filters = form.filters() if form.is_bound else {}
        page = selectors.list_transactions(principal, limit=page_size(request), **filters)
    next_url = None
    if page is not None and page.next_after:
        params = request.GET.copy()
        params["after"] = page.next_after
        next_url = f"{request.path}?{params.urlencode()}"
    context = {
        "form": form,
        "page": page,
        "next_url": next_url,
        "first_page": not request.GET.get("after"),
        "tab": "history",
    }
    return render_page(request, "actions/history.html", context, partial="results", status=status)


@never_cache
@require_GET
@dashboard_view
def detail(request: HttpRequest, transaction_id: str) -> HttpResponse:
    """One plan, everything a reviewer needs, and the decisions the operator may take."""
    principal = principal_for(request)
    context = _detail_context(principal, _checked_id(transaction_id))
    return render(request, DETAIL, context)


@require_GET
@dashboard_view
def verify(request: HttpRequest, transaction_id: str) -> HttpResponse:
    """Run the verifier (V-1) on one transaction and show each failure; read-only.

    Needs the auditor or approver role on the plan's scope. With htmx only
    the verification panel is returned.
    """
    principal = principal_for(request)
    txn = selectors.visible_transaction(principal, _checked_id(transaction_id))
    # TransactionNotFound: the decorator's 404.
    report = services.verify(transaction_id=txn["transaction_id"], principal=principal).as_dict()
    if getattr(request, "htmx", False):
        return render(request, f"{DETAIL}#verification", {"verification": report, "txn": txn})
    context = _detail_context(principal, txn["transaction_id"], verification=report)
    return render(request, DETAIL, context)


@require_GET
@dashboard_view
def receipt_json(request: HttpRequest, transaction_id: str) -> HttpResponse:
    """The transaction's receipt (aetna-action-receipt-v1), byte for byte as stored, as a download."""
    principal = principal_for(request)
    detail = selectors.transaction_detail(principal, _checked_id(transaction_id))
    receipt = detail.receipt
    if receipt is None:
        raise Http404("this transaction has no receipt yet")
    response = HttpResponse(canonical_json(receipt), content_type="application/json")
    response["Content-Disposition"] = (
        f'attachment; filename="{receipt["transaction_id"]}-receipt.json"'
    )
    return response


# -- decisions (POST) -----------------------------------------------------------------------


def _for_approver(request: HttpRequest, transaction_id: str) -> tuple[Principal, str]:
    """The operator and the ID, or 404 unless they hold the approver role on the plan's scope."""
    principal = principal_for(request)
    txn = selectors.visible_transaction(principal, _checked_id(transaction_id), access.APPROVE)
    return principal, txn["transaction_id"]


@require_POST
@dashboard_view
def approve(request: HttpRequest, transaction_id: str) -> HttpResponse:
    """Sign an approval of this exact plan on the server, as the signed-in person."""
    principal, txn_id = _for_approver(request, transaction_id)
    try:
        services.approve(transaction_id=txn_id, principal=principal)
    except ActionError as exc:
        return _refused(request, principal, txn_id, exc)
    messages.success(
        request,
        "Approved. The server signed an approval of this exact plan in your name; "
        "commit it before the approval expires.",
    )
    return redirect("actions:detail", transaction_id=txn_id)


@require_POST
@dashboard_view
def deny(request: HttpRequest, transaction_id: str) -> HttpResponse:
    """Refuse the plan with a reason; it ends aborted, with a receipt."""
    principal, txn_id = _for_approver(request, transaction_id)
    form = DenyForm(request.POST)
    if not form.is_valid():
        context = _detail_context(principal, txn_id, deny_form=form)
        return render(request, DETAIL, context, status=400)
    try:
        services.deny(
            transaction_id=txn_id, reason=form.cleaned_data["reason"], principal=principal
        )
    except ActionError as exc:
        return _refused(request, principal, txn_id, exc, deny_form=form)
    messages.success(
        request, "Denied. The plan is aborted and its receipt issued; it can never run."
    )
    return redirect("actions:detail", transaction_id=txn_id)


@require_POST
@dashboard_view
def abort(request: HttpRequest, transaction_id: str) -> HttpResponse:
    """Abort a plan that has not started executing (staged, awaiting approval or approved)."""
    principal, txn_id = _for_approver(request, transaction_id)
    form = AbortForm(request.POST)
    if not form.is_valid():
        context = _detail_context(principal, txn_id, abort_form=form)
        return render(request, DETAIL, context, status=400)
    try:
        services.abort(
            transaction_id=txn_id, reason=form.cleaned_data["reason"], principal=principal
        )
    except ActionError as exc:
        return _refused(request, principal, txn_id, exc, abort_form=form)
    messages.success(request, "Aborted. Nothing ran; the receipt is below.")
    return redirect("actions:detail", transaction_id=txn_id)


COMMIT_OUTCOMES: dict[str, tuple[int, str]] = {
    formats.COMMITTED: (messages.SUCCESS, "Committed: every operation ran and was verified."),
    formats.ABORTED: (
        messages.WARNING,
        "Not committed: the world changed after approval (a precondition no longer holds), "
        "so nothing ran and the plan is aborted. Ask the agent to stage it again.",
    ),
    formats.COMPENSATED: (
        messages.WARNING,
        "Not committed: an operation could not run, and everything already done was undone "
        "and the undo verified.",
    ),
    formats.PARTIAL: (
        messages.ERROR,
        "Not committed, and not everything could be undone: see what to check below.",
    ),
    formats.UNCERTAIN: (
        messages.ERROR,
        "Outcome uncertain: an operation failed in a way that leaves its effect unknown. "
        "Nothing will retry it; see what to check below.",
    ),
}


@require_POST
@dashboard_view
def commit(request: HttpRequest, transaction_id: str) -> HttpResponse:
    """Execute an approved plan; every outcome ends with a receipt, shown on the plan page."""
    principal, txn_id = _for_approver(request, transaction_id)
    try:
        result = services.commit(transaction_id=txn_id, principal=principal)
    except ActionError as exc:
        return _refused(request, principal, txn_id, exc)
    state = result.transaction.state
    level, text = COMMIT_OUTCOMES.get(state, (messages.INFO, f"The transaction is {state}."))
    messages.add_message(request, level, text)
    return redirect("actions:detail", transaction_id=txn_id)


@require_POST
@dashboard_view
def recover(request: HttpRequest, transaction_id: str) -> HttpResponse:
    """Fence a run that died mid-commit: recovery_required, in-flight operations uncertain."""
    principal, txn_id = _for_approver(request, transaction_id)
    try:
        services.recover(transaction_id=txn_id, principal=principal)
    except ActionError as exc:
        return _refused(request, principal, txn_id, exc)
    messages.warning(
        request,
        "Recovery recorded: the run is fenced and ends recovery_required. Nothing was retried; "
        "check the world as described below.",
    )
    return redirect("actions:detail", transaction_id=txn_id)


@require_POST
@dashboard_view
def resolve(request: HttpRequest, transaction_id: str) -> HttpResponse:
    """Record how an uncertain or recovery-required transaction was closed (approver role)."""
    principal, txn_id = _for_approver(request, transaction_id)
    form = ResolutionForm(request.POST)
    if not form.is_valid():
        context = _detail_context(principal, txn_id, resolution_form=form)
        return render(request, DETAIL, context, status=400)
    try:
        services.record_resolution(
            transaction_id=txn_id,
            outcome=form.cleaned_data["outcome"],
            note=form.cleaned_data["note"],
            owner=form.cleaned_data["owner"],
            principal=principal,
        )
    except ActionError as exc:
        return _refused(request, principal, txn_id, exc, resolution_form=form)
    messages.success(
        request,
        "Resolution recorded: this transaction left the attention queue (its state is unchanged; "
        "find it under Needs attention, Resolved).",
    )
    return redirect("actions:detail", transaction_id=txn_id)


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def purge(request: HttpRequest, transaction_id: str) -> HttpResponse:
    """GET: what a purge erases, and a confirmation. POST: purge a finished transaction's payloads."""
    principal, txn_id = _for_approver(request, transaction_id)
    form = PurgeForm(request.POST if request.method == "POST" else None)
    error = ""
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                result = services.purge_payloads(transaction_id=txn_id, principal=principal)
            except TransactionNotFound as exc:
                raise Http404("not found") from exc
            except ActionError as exc:
                error, status = str(exc), 409
            else:
                messages.success(
                    request,
                    f"Purged {result.purged_count} payload(s). The receipt and the audit chain "
                    f"still verify; the purge is audit event {result.audit_event_id}.",
                )
                return redirect("actions:detail", transaction_id=txn_id)
        else:
            status = 400
    detail = selectors.transaction_detail(principal, txn_id)
    context = {
        "detail": detail,
        "txn": detail.transaction,
        "operations": detail.operations,
        "form": form,
        "error": error,
        "database_vendor": settings.DATABASE_VENDOR,
    }
    return render(request, "actions/purge.html", context, status=status)
