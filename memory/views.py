"""The memory pages of the operator dashboard: scopes, records, review, forget, receipts.

Every view parses its input, calls a selector (reads, visibility built in) or
a service (writes, capability checked, audited), and renders a page or one of
its htmx partials. Nothing here queries a model or decides a permission:
``AccessDenied`` from a selector or service becomes a 404 through
:func:`aetnaweb.dashboard.dashboard_view`, and an invalid scope in a URL a 404
page naming the reason. ``access.may`` is used only to decide which buttons
to show; the service refuses anyway.
"""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from aetnaweb import access
from aetnaweb.access import SYSTEM, Principal
from aetnaweb.dashboard import (
    dashboard_view,
    htmx_target,
    page_key,
    principal_for,
    query_string,
    render_page,
)
from aetnaweb.scopes import Scope
from audit import selectors as audit_selectors
from audit.chain import row_event_hash
from audit.models import AuditEvent
from audit.readable import event_summary
from audit.receipts import receipt_shape_failures, verify_deletion_receipt
from memory import selectors, services, vectors
from memory.errors import (
    EpisodeNotFound,
    ForgetNotConfirmed,
    ForgetPreviewStale,
    ForgetSelectionError,
    InvalidInput,
    MemoryEngineError,
    QueryError,
    RecordNotFound,
    RecordStateError,
    SelectorError,
    SourceFactsWaiting,
    WarningNotAcknowledged,
)
from memory.extraction import review_warnings
from memory.forms import (
    PROMOTE,
    REJECT_WORD,
    BulkDecisionForm,
    DecisionForm,
    ForgetApplyForm,
    ForgetForm,
    RecallTestForm,
    ReceiptVerifyForm,
    RecordFilterForm,
    ReviewScopeForm,
    ScopeJumpForm,
    SourceDecisionForm,
)
from memory.models import Record, SourceType, Status, TrustTier
from memory.services.holds import holds_over
from memory.services.review import quoted_fact

RECORDS_PER_PAGE = 50
QUEUE_PER_PAGE = 25
RECEIPTS_ON_SCOPE_PAGE = 10
SESSION_RECALLS = 50
MAX_SESSION_ID = 200  # the column width of session_id everywhere
LIVE_CHAIN_LIMIT = 20_000  # events checked on page load (about a second; see docs/operators.md)
# Every status that still holds content; a forget takes the record's whole lineage.
FORGETTABLE = {Status.ACTIVE, Status.QUARANTINED, Status.SUPERSEDED}
TOMBSTONING_EVENTS = {"memory.forget", "memory.record_rejected"}
TRUST_LABELS = dict(TrustTier.choices)
SOURCE_LABELS = dict(SourceType.choices)
STATUS_LABELS = dict(Status.choices)


def _safe_next(request: HttpRequest, fallback: str) -> str:
    """A same-site ``next`` URL from the form, or ``fallback``."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


# -- scope browser ----------------------------------------------------------------

_URL_MARK = "scope-url-mark"
# What Django's reverse() leaves unquoted in a path argument (scopes only ever
# use letters, digits, '.', '_', '-', ':' and '*', all of them safe).
_URL_SAFE = "!$&'()*+,;=/~:@"


def tree_html(nodes: list[dict[str, Any]]) -> SafeString:
    """Scope-tree nodes (:func:`memory.selectors.scope_tree`) as nested ``<li>`` items.

    Built here, not by a recursive template include: a platform reader's tree
    has thousands of nodes, and an include plus a URL reversal per node took
    about 300 ms at 5,000 scopes (this takes a few). The markup is what
    ``.tree`` in static/css/aetnaweb.css styles; every string put into it is
    escaped (``html.escape``, what Django's ``escape`` calls, without its lazy
    wrapper) and every number is an int, hence the mark_safe.
    """
    before, _, after = reverse("memory:scope", args=[_URL_MARK]).partition(_URL_MARK)
    parts: list[str] = []

    def add(node: dict[str, Any]) -> None:
        counts = node["counts"]
        href = html.escape(before + quote(node["scope"], safe=_URL_SAFE) + after)
        badges = [
            '<span class="badge badge-active" title="Active records stored at exactly this '
            f'scope">{int(counts["active"])} active</span>'
        ]
        if counts["quarantined"]:
            badges.append(
                '<span class="badge badge-quarantined" title="Waiting for review">'
                f"{int(counts['quarantined'])} quarantined</span>"
            )
        if counts["superseded"]:
            badges.append(
                '<span class="badge badge-superseded">'
                f"{int(counts['superseded'])} superseded</span>"
            )
        if counts["tombstoned"]:
            badges.append(
                f'<span class="badge badge-tombstoned">{int(counts["tombstoned"])} forgotten</span>'
            )
        badge_html = "\n".join(badges)
        parts.append(
            f'<li>\n<div class="tree-node">\n<span><a href="{href}">{html.escape(node["scope"])}</a> '
            f'<span class="level">{html.escape(node["level"])}</span></span>\n'
            f'<span class="tree-counts">\n{badge_html}\n</span>\n</div>\n'
        )
        if node["children"]:
            parts.append("<ul>")
            for child in node["children"]:
                add(child)
            parts.append("</ul>\n")
        parts.append("</li>\n")

    for node in nodes:
        add(node)
    return mark_safe("".join(parts))  # noqa: S308  (escaped above, see the docstring)


@never_cache
@require_GET
@dashboard_view
def scopes(request: HttpRequest) -> HttpResponse:
    """The tenant -> user -> project tree of scopes holding memory that the operator may read."""
    principal = principal_for(request)
    form = ScopeJumpForm(request.GET or None)
    status = 200
    if form.is_bound:
        if form.is_valid():
            return redirect("memory:scope", scope=str(form.cleaned_data["scope"]))
        status = 400
    tree = selectors.scope_tree(principal)
    return render_page(
        request,
        "memory/scopes.html",
        {
            "form": form,
            "tree": tree_html(tree),
            "scope_total": selectors.count_scopes_with_memory(principal) if tree else 0,
            "tree_max": selectors.TREE_MAX_SCOPES,
            "grants": [str(scope) for scope, _ in principal.bindings],
            "may_review": access.has_capability_anywhere(principal, access.REVIEW),
        },
        status=status,
    )


def _children(principal: Principal, parsed: Scope) -> list[dict[str, Any]]:
    """The direct child scopes of ``parsed`` that hold memory and the operator may read."""
    if parsed.depth == 3:
        return []
    if parsed.is_platform:
        return [node for node in selectors.scope_tree(principal) if node["level"] == "tenant"]
    for tenant in selectors.scope_tree(principal, tenant=parsed.tenant):
        if tenant["scope"] != str(Scope.of(parsed.tenant)):
            continue
        if parsed.depth == 1:
            return list(tenant["children"])
        for user in tenant["children"]:
            if user["scope"] == str(parsed):
                return list(user["children"])
    return []


def _scope_page(
    request: HttpRequest,
    principal: Principal,
    parsed: Scope,
    *,
    recall_form: RecallTestForm | None = None,
    recall_result: services.RecallResult | None = None,
    status: int = 200,
) -> HttpResponse:
    """The scope page (records, effective recall, recall tester), or one of its partials."""
    target = htmx_target(request)
    context: dict[str, Any] = {
        "scope": parsed,
        "recall_form": recall_form or RecallTestForm(),
        "recall_result": recall_result,
        "semantic_status": vectors.status() if recall_result else None,
        "recall_rows": [
            {"candidate": candidate, "trust_label": TRUST_LABELS.get(candidate.trust_tier, "")}
            for candidate in (recall_result.candidates if recall_result else ())
        ],
    }
    if target == "recall-results":
        return render_page(
            request, "memory/scope_detail.html", context, partial="recall", status=status
        )
    filters = RecordFilterForm(request.GET)
    page = None
    if filters.is_valid():
        try:
            page = selectors.list_records(
                principal,
                scope=parsed,
                after=page_key(request, "after"),
                limit=RECORDS_PER_PAGE,
                **filters.selector_filters(),
            )
        except QueryError as exc:
            filters.add_error(None, str(exc))
    else:
        # Invalid filters list nothing, but the scope must still be readable.
        access.require(principal, access.READ, parsed)
    if page is None and status == 200:
        status = 400
    context.update(
        filters=filters,
        page=page,
        next_url=f"?{query_string(request, after=page.next_cursor)}"
        if page and page.next_cursor
        else None,
        first_url=f"?{query_string(request, after=None)}" if request.GET.get("after") else None,
        # Forget acts at exactly one scope: with the scopes below listed, the
        # ticked records could belong to several, so the selection is off.
        below=bool(filters.is_valid() and filters.cleaned_data.get("below")),
        scope_text=str(parsed),
        may_forget=access.may(principal, access.FORGET, parsed)
        and not (filters.is_valid() and filters.cleaned_data.get("below")),
        may_recall=access.may_act(principal, access.READ, parsed),
        own_scopes=access.granted_scopes(principal, access.READ),
        may_review=access.may(principal, access.REVIEW, parsed),
        # Erasing a person (issue 32): admins of a user's subtree.
        may_erase=parsed.depth >= 2 and access.may_erase_subject(principal, parsed),
        may_hold=not parsed.is_platform and access.may_erase_subject(principal, parsed),
        legal_holds=holds_over(parsed),
        forgettable=FORGETTABLE,
    )
    if target == "records":
        return render_page(
            request, "memory/scope_detail.html", context, partial="records", status=status
        )
    context.update(
        counts=selectors.scope_counts(principal, scope=parsed),
        lineage=selectors.effective_recall_scopes(principal, scope=parsed),
        children=tree_html(_children(principal, parsed)),
        receipts=selectors.list_receipts(
            principal, scope=parsed, limit=RECEIPTS_ON_SCOPE_PAGE
        ).items,
    )
    return render_page(request, "memory/scope_detail.html", context, status=status)


@never_cache
@require_GET
@dashboard_view
def scope_detail(request: HttpRequest, scope: str) -> HttpResponse:
    """One scope: its records (filtered, paginated by key), counters, children, recall panel."""
    principal = principal_for(request)
    parsed = Scope.parse(scope)
    access.require(principal, access.READ, parsed)
    return _scope_page(request, principal, parsed)


@never_cache
@require_POST
@dashboard_view
def scope_recall(request: HttpRequest, scope: str) -> HttpResponse:
    """The recall tester: a real recall (logged and audited like every recall), shown scored."""
    principal = principal_for(request)
    parsed = Scope.parse(scope)
    form = RecallTestForm(request.POST)
    result = None
    if form.is_valid():
        try:
            result = services.recall(
                scope=parsed,
                query=form.cleaned_data["query"],
                limit=form.cleaned_data["limit"],
                min_score=form.cleaned_data["min_score"],
                principal=principal,
            )
        except MemoryEngineError as exc:
            form.add_error(None, str(exc))
        except access.AncestorOnly as exc:
            form.add_error(None, str(exc))
    else:
        access.require(principal, access.READ, parsed)
    return _scope_page(
        request,
        principal,
        parsed,
        recall_form=form,
        recall_result=result,
        status=200 if result is not None else 400,
    )


@never_cache
@require_GET
@dashboard_view
def scope_chain(request: HttpRequest, scope: str) -> HttpResponse:
    """Whether the scope's audit chain verifies (a partial the scope page loads after itself)."""
    principal = principal_for(request)
    parsed = Scope.parse(scope)
    length = selectors.chain_length(principal, scope=parsed)
    # Verifying walks the whole chain; past LIVE_CHAIN_LIMIT events it runs only
    # when asked (?full=1), so a scope page never waits on it unawares.
    full = request.GET.get("full") == "1"
    chain = (
        selectors.chain_status(principal, scope=parsed)
        if full or length <= LIVE_CHAIN_LIMIT
        else None
    )
    return render_page(
        request,
        "memory/chain_status.html",
        {
            "scope": parsed,
            "chain": chain,
            "length": length,
            "live_limit": LIVE_CHAIN_LIMIT,
            "may_audit": access.may(principal, access.AUDIT, parsed),
        },
        partial="chain" if htmx_target(request) == "chain-status" else None,
    )


# -- record page -------------------------------------------------------------------


def _event_rows(events: list[AuditEvent]) -> list[dict[str, Any]]:
    rows = []
    for event in events:
        try:
            recomputes = row_event_hash(event) == event.event_hash
        except ValueError:
            recomputes = False
        try:
            payload = json.dumps(json.loads(event.payload), indent=2, sort_keys=True)
        except ValueError:
            payload = event.payload
        rows.append(
            {
                "event": event,
                "recomputes": recomputes,
                "payload": payload,
                # created_at is the chain's ISO-8601 text; shown to the second, in UTC
                "when": event.created_at[:19].replace("T", " "),
            }
        )
    return rows


@never_cache
@require_GET
@dashboard_view
def record_detail(request: HttpRequest, record_id: str) -> HttpResponse:
    """A record: content, provenance, lifecycle, the audit events naming it, its recalls."""
    principal = principal_for(request)
    detail = selectors.record_detail(principal, record_id)  # RecordNotFound: the decorator's 404
    record = detail.record
    events = _event_rows(detail.audit_events)
    reasons = selectors.review_reasons(principal, record.record_id)
    for row in events:
        row["reason"] = reasons.get(row["event"].event_id, "")
        row["summary"] = event_summary(row["event"])
    promoted = next(
        (row for row in events if row["event"].event_type == "memory.record_promoted"), None
    )
    tombstoned_by = next(
        (row["event"] for row in reversed(events) if row["event"].event_type in TOMBSTONING_EVENTS),
        None,
    )
    may_review = access.may(principal, access.REVIEW, record.scope)
    binding = detail.binding
    return render_page(
        request,
        "memory/record_detail.html",
        {
            "detail": detail,
            "record": record,
            "scope": Scope.parse(record.scope),
            "episode": detail.episode,
            "events": events,
            "promoted": promoted,
            "tombstoned_by": tombstoned_by,
            "binding": binding,
            # Values as JSON text, so 42 and "42" read differently (autoescaped).
            "metadata_rows": [
                (key, json.dumps(value, ensure_ascii=False))
                for key, value in (record.metadata or {}).items()
            ],
            "returned_recalls": [hit for hit in detail.recalls if hit.returned],
            "considered_recalls": [hit for hit in detail.recalls if not hit.returned],
            "may_review": may_review and record.status == Status.QUARANTINED,
            "review_warnings": review_warnings(record.content),
            "source_siblings": [
                sibling.record_id
                for group in selectors.waiting_siblings(principal, [record]).values()
                for sibling in group
                if sibling.record_id != record.record_id
            ]
            if may_review and record.status == Status.QUARANTINED
            else [],
            "may_forget": access.may(principal, access.FORGET, record.scope)
            and record.status in FORGETTABLE,
            "decision_form": DecisionForm(
                initial={"scope": record.scope, "record_id": record.record_id}
            ),
        },
    )


# -- review queue ------------------------------------------------------------------


@never_cache
@require_GET
@dashboard_view
def retrieval_detail(request: HttpRequest, retrieval_id: str) -> HttpResponse:
    """Why was this recalled: a stored recall's question (digest), asker, and every candidate."""
    principal = principal_for(request)
    detail = selectors.get_retrieval(principal, retrieval_id)  # unknown: the decorator's 404
    return render_page(
        request,
        "memory/retrieval_detail.html",
        {
            "detail": detail,
            "retrieval": detail.event,
            "scope": Scope.parse(detail.event.scope),
            "hidden_candidates": sum(1 for c in detail.candidates if c.record is None),
        },
    )


@never_cache
@require_GET
@dashboard_view
def session_detail(request: HttpRequest) -> HttpResponse:
    """One agent session's recalls (``?id=SESSION``), newest first, at scopes you may read."""
    principal = principal_for(request)
    session_id = request.GET.get("id", "").strip()
    if not session_id or len(session_id) > MAX_SESSION_ID:
        raise Http404("no such session")
    retrievals = selectors.session_retrievals(principal, session_id, limit=SESSION_RECALLS)
    return render_page(
        request,
        "memory/session_detail.html",
        {"session_id": session_id, "retrievals": retrievals, "limit": SESSION_RECALLS},
    )


def _decided_row(
    scope: Scope | str, record_id: str, audit_event_id: str, seen: dict[str, Record], **extra: Any
) -> dict[str, Any]:
    """One line of the result page: what was decided, by its content as the reviewer saw it
    (a rejected record's content is purged by now, so it is read before deciding)."""
    record = seen.get(record_id)
    return {
        "scope": str(scope),
        "record_id": record_id,
        "audit_event_id": audit_event_id,
        "content": record.content if record else "",
        "fact_key": record.fact_key if record else "",
        **extra,
    }


def _queue_page(
    request: HttpRequest,
    principal: Principal,
    *,
    failed: tuple[str, DecisionForm] | None = None,
    bulk_form: BulkDecisionForm | None = None,
    source_form: SourceDecisionForm | None = None,
    problem: str | None = None,
    status: int = 200,
) -> HttpResponse:
    scope_form = ReviewScopeForm(request.GET)
    may_review = access.has_capability_anywhere(principal, access.REVIEW)
    page = None
    position = None
    filters: dict[str, Any] = {}
    if scope_form.is_valid():
        filters = scope_form.queue_filters(timezone.now())
    elif status == 200:
        status = 400
    narrowed = filters.get("scope")
    # A named scope is always asked of the selector, so one out of reach is a 404.
    if may_review or narrowed is not None:
        try:
            after = page_key(request, "after")
            page = selectors.review_queue(principal, **filters, after=after, limit=QUEUE_PER_PAGE)
            position = selectors.review_queue_position(principal, **filters, after=after)
        except QueryError as exc:
            scope_form.add_error(None, str(exc))
            status = 400
    failed_id, failed_form = failed if failed else (None, None)
    # A refused submission shows the page again with the person's ticks and
    # choices as they sent them, so nothing has to be picked again.
    ticked: set[str] = set()
    if bulk_form is not None and hasattr(bulk_form.data, "getlist"):
        ticked = set(bulk_form.data.getlist("items"))
    page_records = list(page.items) if page else []
    siblings = selectors.waiting_siblings(principal, page_records)
    groups: list[dict[str, Any]] = []
    placed: set[str] = set()
    for record in page_records:
        if record.record_id in placed:
            continue
        # Facts of one source message are shown (and rejected) together, with
        # the source once: a rejection purges it, so none is judged without it.
        members = siblings.get(record.episode_id or "", []) or [record]
        if record.record_id not in {m.record_id for m in members}:
            members = [record]
        same_source = (
            source_form is not None and source_form.data.get("episode_id") == record.episode_id
        )
        items: list[dict[str, Any]] = []
        for member in members:
            placed.add(member.record_id)
            form = failed_form if member.record_id == failed_id else None
            item_value = f"{member.scope}|{member.record_id}"
            items.append(
                {
                    "record": member,
                    "item_value": item_value,
                    "ticked": item_value in ticked,
                    "choice": source_form.data.get(f"decision-{member.record_id}")
                    if source_form is not None and same_source
                    else None,
                    "warnings": review_warnings(member.content),
                    "form": form
                    or DecisionForm(initial={"scope": member.scope, "record_id": member.record_id}),
                }
            )
        groups.append(
            {
                "record": items[0]["record"],
                "items": items,
                "together": len(items) > 1,
                "warned": any(item["warnings"] for item in items),
                "form": source_form
                if source_form is not None and same_source
                else SourceDecisionForm(
                    initial={"scope": record.scope, "episode_id": record.episode_id}
                ),
            }
        )
    items = [item for group in groups for item in group["items"]]
    current = selectors.current_slot_values(principal, [item["record"] for item in items])
    for item in items:
        item["current"] = current.get(item["record"].record_id)
    pages = None
    if position is not None:
        pages = {
            "total": position.total,
            "capped": position.capped,
            "number": position.before // QUEUE_PER_PAGE + 1,
            "count": max(1, -(-position.total // QUEUE_PER_PAGE)),
            "first": position.before + 1 if page_records else 0,
            "last": position.before + len(page_records),
        }
    return render_page(
        request,
        "memory/review_queue.html",
        {
            "may_review": may_review,
            "scope_form": scope_form,
            "narrowed": narrowed,
            "filtered": bool(
                filters.get("source_type") or filters.get("waiting_since") or filters.get("warning")
            ),
            "page": page,
            "pages": pages,
            "items": items,
            "groups": groups,
            "ticked_count": sum(1 for item in items if item["ticked"]),
            "all_matching_limit": BulkDecisionForm.MAX_ITEMS,
            "next_url": f"?{query_string(request, after=page.next_cursor)}"
            if page and page.next_cursor
            else None,
            "first_url": f"?{query_string(request, after=None)}"
            if request.GET.get("after")
            else None,
            "bulk_form": bulk_form or BulkDecisionForm(),
            "reject_word": REJECT_WORD,
            "problem": problem,
            "failed_id": failed_id if failed_form is not None else None,
            # Where a decision returns to: the queue with its filters, even when
            # this render answers a POST to the decide or bulk URL.
            "return_to": _queue_url(request),
        },
        status=status,
    )


def _queue_url(request: HttpRequest) -> str:
    return reverse("memory:review") + (f"?{request.GET.urlencode()}" if request.GET else "")


@never_cache
@require_GET
@dashboard_view
def review_queue(request: HttpRequest) -> HttpResponse:
    """Quarantined records across the operator's reviewable scopes, oldest first."""
    return _queue_page(request, principal_for(request))


def _stale_message(record: Record | None, record_id: str, scope: Scope, exc: Exception) -> str:
    named = quoted_fact(record.content) if record is not None and record.content else record_id
    return f"Nothing was changed. {named} at {scope}: {exc}"


@never_cache
@require_POST
@dashboard_view
def review_decide(request: HttpRequest) -> HttpResponse:
    """Promote or reject one quarantined record, with the operator as the audit actor."""
    principal = principal_for(request)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        return _queue_page(
            request,
            principal,
            failed=(request.POST.get("record_id", ""), form),
            problem="The decision was not made: see the form below.",
            status=400,
        )
    scope = form.cleaned_data["scope"]
    record_id = form.cleaned_data["record_id"]
    seen = selectors.quarantined_for_review(principal, [(scope, record_id)])
    named = quoted_fact(seen[record_id].content) if record_id in seen else record_id
    try:
        if form.cleaned_data["decision"] == PROMOTE:
            promoted = services.promote(
                scope=scope,
                record_id=record_id,
                reason=form.cleaned_data["reason"],
                acknowledged=form.cleaned_data["acknowledge"],
                principal=principal,
            )
            messages.success(
                request,
                format_html(
                    'Promoted {} (<a href="{}">{}</a>) at {}: it is active and recall may '
                    "return it (audit event {}).",
                    named,
                    reverse("memory:record", args=[record_id]),
                    record_id,
                    scope,
                    promoted.audit_event_id,
                ),
            )
        else:
            receipt = services.reject(
                scope=scope,
                record_id=record_id,
                reason=form.cleaned_data["reason"],
                principal=principal,
            )
            messages.success(
                request,
                format_html(
                    "Rejected {} ({}) at {}: its content and source text are purged. "
                    '<a href="{}">Deletion receipt</a>.',
                    named,
                    record_id,
                    scope,
                    reverse("memory:receipt", args=[receipt["audit_event_id"]]),
                ),
            )
    except (WarningNotAcknowledged, SourceFactsWaiting) as exc:
        return _queue_page(
            request, principal, failed=(record_id, form), problem=str(exc), status=exc.status
        )
    except RecordStateError as exc:
        # (RecordNotFound is the decorator's 404.) A stale page: someone else decided first. Show the queue as it is now.
        return _queue_page(
            request,
            principal,
            problem=_stale_message(seen.get(record_id), record_id, scope, exc),
            status=409,
        )
    return redirect(_safe_next(request, reverse("memory:review")))


@never_cache
@require_POST
@dashboard_view
def review_bulk(request: HttpRequest) -> HttpResponse:
    """Promote or reject every ticked record (or every one matching the queue's filter),
    all or nothing, after a confirmation."""
    principal = principal_for(request)
    form = BulkDecisionForm(request.POST)
    if not form.is_valid():
        return _queue_page(
            request,
            principal,
            bulk_form=form,
            problem="Nothing was changed: see the bulk decision form.",
            status=400,
        )
    decision = form.cleaned_data["decision"]
    reason = form.cleaned_data["reason"]
    chosen: list[tuple[Scope, str]] = form.cleaned_data["items"]
    if form.cleaned_data["all_matching"]:
        filter_form = ReviewScopeForm(request.GET)
        if not filter_form.is_valid():
            return _queue_page(
                request, principal, bulk_form=form, problem="Nothing was changed.", status=400
            )
        matching = selectors.review_queue_items(
            principal, **filter_form.queue_filters(timezone.now()), limit=form.MAX_ITEMS
        )
        chosen = [(Scope.parse(scope), record_id) for scope, record_id in matching]
        expected = form.cleaned_data["expected"]
        if expected is not None and expected != len(chosen):
            return _queue_page(
                request,
                principal,
                bulk_form=form,
                problem=f"Nothing was changed: {len(chosen)} records match the filter now, "
                f"not the {expected} the page showed (someone decided some meanwhile). "
                "Look again and confirm.",
                status=409,
            )
        if not chosen:
            return _queue_page(
                request,
                principal,
                bulk_form=form,
                problem="Nothing was changed: no record matches the filter.",
                status=400,
            )
    seen = selectors.quarantined_for_review(principal, chosen)
    try:
        decided = services.decide_records(
            items=chosen,
            decision=decision,
            reason=reason,
            acknowledged=form.cleaned_data["acknowledge"],
            principal=principal,
        )
    except (WarningNotAcknowledged, SourceFactsWaiting) as exc:
        return _queue_page(request, principal, bulk_form=form, problem=str(exc), status=exc.status)
    except RecordStateError as exc:  # (RecordNotFound is the decorator's 404)
        # A stale item (decided by someone else meanwhile): the service changed nothing.
        return _queue_page(request, principal, problem=f"Nothing was changed. {exc}", status=409)
    results = [_decided_row(p.scope, p.record_id, p.audit_event_id, seen) for p in decided.promoted]
    # Receipts come in the order the records were named.
    results += [
        _decided_row(scope, record_id, r["audit_event_id"], seen, receipt=True)
        for (scope, record_id), r in zip(chosen, decided.receipts, strict=False)
    ]
    return render_page(
        request,
        "memory/review_done.html",
        {"decision": decision, "results": results, "return_to": _queue_url(request)},
    )


@never_cache
@require_POST
@dashboard_view
def review_source(request: HttpRequest) -> HttpResponse:
    """Decide every waiting fact of one source message at once (promote some, reject others)."""
    principal = principal_for(request)
    form = SourceDecisionForm(request.POST)
    if not form.is_valid():
        return _queue_page(
            request,
            principal,
            source_form=form,
            problem="Nothing was changed: choose promote or reject for every fact of the "
            "source and give a reason.",
            status=400,
        )
    scope = form.cleaned_data["scope"]
    decisions = form.cleaned_data["decisions"]
    items = [(scope, record_id) for record_id in decisions]
    seen = selectors.quarantined_for_review(principal, items)
    try:
        decided = services.decide_source(
            scope=scope,
            episode_id=form.cleaned_data["episode_id"],
            decisions=decisions,
            reason=form.cleaned_data["reason"],
            acknowledged=form.cleaned_data["acknowledge"],
            principal=principal,
        )
    except (WarningNotAcknowledged, SourceFactsWaiting) as exc:
        return _queue_page(
            request, principal, source_form=form, problem=str(exc), status=exc.status
        )
    except (RecordStateError, InvalidInput) as exc:
        # The queue page, re-rendered with the problem: 409 stale, 400 a malformed decision.
        return _queue_page(
            request,
            principal,
            source_form=form,
            problem=f"Nothing was changed: {exc}",
            status=exc.status,
        )
    results = [_decided_row(p.scope, p.record_id, p.audit_event_id, seen) for p in decided.promoted]
    results += [
        _decided_row(
            decided.scope, r["purged_record_ids"][0], r["audit_event_id"], seen, receipt=True
        )
        for r in decided.receipts
    ]
    return render_page(
        request,
        "memory/review_done.html",
        {
            "decision": "mixed",
            "results": results,
            "promoted": len(decided.promoted),
            "rejected": len(decided.receipts),
            "return_to": _queue_url(request),
        },
    )


# -- forget ------------------------------------------------------------------------


def _forget_form_page(
    request: HttpRequest, parsed: Scope, form: ForgetForm, *, status: int = 200
) -> HttpResponse:
    return render_page(
        request, "memory/forget.html", {"scope": parsed, "form": form}, status=status
    )


def _preview_page(
    request: HttpRequest,
    principal: Principal,
    parsed: Scope,
    form: ForgetForm,
    *,
    stale: str | None = None,
    refused: str | None = None,
) -> HttpResponse:
    """Preview (writes nothing) and offer to apply exactly what it lists."""
    include_below = bool(form.cleaned_data.get("include_below"))
    try:
        preview = services.forget_preview(
            scope=parsed,
            principal=principal,
            include_below=include_below,
            **form.service_arguments(),
        )
    except MemoryEngineError as exc:
        # Vague text, nothing matched, an ID that is gone: the form says why.
        form.add_error(None, _sentence(str(exc)))
        return _forget_form_page(request, parsed, form, status=409 if stale else 400)
    sources = {row["episode_id"] for row in preview.records if row["episode_id"]}
    # A refused apply shows the rows as the operator left them, and what they typed.
    applied = form.cleaned_data if refused else {}
    kept_records = set(applied.get("keep_record_ids") or preview.record_ids)
    kept_episodes = set(applied.get("keep_episode_ids") or preview.episode_ids)
    return render_page(
        request,
        "memory/forget_preview.html",
        {
            "scope": parsed,
            "preview": preview,
            "rows": [
                {
                    **row,
                    "status_label": STATUS_LABELS.get(row["status"], row["status"]),
                    "source_label": SOURCE_LABELS.get(row["source_type"], row["source_type"]),
                    "trust_label": TRUST_LABELS.get(row["trust_tier"], row["trust_tier"]),
                    "created": row["created_at"][:16].replace("T", " "),
                    "ticked": row["record_id"] in kept_records,
                    "below": row["scope"] != str(parsed),
                }
                for row in preview.records
            ],
            # Messages emptied as a purged record's source are named by ID (the
            # record's row shows the content); the others are shown with their text.
            "source_episode_ids": sorted(sources),
            "episodes": [
                {
                    **row,
                    "source_label": SOURCE_LABELS.get(row["source_type"], row["source_type"]),
                    "created": row["created_at"][:16].replace("T", " "),
                    "ticked": row["episode_id"] in kept_episodes,
                    "below": row["scope"] != str(parsed),
                }
                for row in preview.episodes
                if row["episode_id"] not in sources
            ],
            "lineage_count": sum(1 for row in preview.records if not row["matched"]),
            "selector": form.cleaned_data.get("selector") or "",
            "record_ids": form.cleaned_data.get("record_ids") or [],
            "episode_ids": form.cleaned_data.get("episode_ids") or [],
            "session_id": form.cleaned_data.get("session_id") or "",
            "include_below": include_below,
            "needs_count": preview.count > preview.confirm_above,
            "typed_count": applied.get("confirm_count"),
            "reference": applied.get("reference") or "",
            "stale": stale,
            "refused": refused,
        },
        status=409 if stale else 400 if refused else 200,
    )


def _sentence(message: str) -> str:
    return message[:1].upper() + message[1:]


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def forget(request: HttpRequest, scope: str) -> HttpResponse:
    """Forget at exactly this scope: choose, preview the exact list, apply, see the receipt."""
    principal = principal_for(request)
    parsed = Scope.parse(scope)
    # The form page itself is for those who may forget here; the services check again.
    access.require(principal, access.FORGET, parsed)
    if request.method == "GET":
        return _forget_form_page(request, parsed, ForgetForm())
    if request.POST.get("step") != "apply":
        form = ForgetForm(request.POST)
        if not form.is_valid():
            return _forget_form_page(request, parsed, form, status=400)
        return _preview_page(request, principal, parsed, form)
    apply_form = ForgetApplyForm(request.POST)
    if not apply_form.is_valid():
        return _forget_form_page(request, parsed, apply_form, status=400)
    left_out = apply_form.left_out()
    try:
        receipt = services.forget(
            scope=parsed,
            expected_record_ids=apply_form.cleaned_data["expected_record_ids"],
            # Not sent (an older page, a hand-made post): the service then refuses only
            # messages the records' own sources do not account for.
            expected_episode_ids=apply_form.cleaned_data["expected_episode_ids"] or None,
            include_below=apply_form.cleaned_data["include_below"],
            confirm_count=apply_form.cleaned_data["confirm_count"],
            reference=apply_form.cleaned_data["reference"] or None,
            exclude_record_ids=left_out["exclude_record_ids"],
            exclude_episode_ids=left_out["exclude_episode_ids"],
            principal=principal,
            **apply_form.service_arguments(),
        )
    except ForgetPreviewStale as exc:
        return _preview_page(request, principal, parsed, apply_form, stale=str(exc))
    except (ForgetNotConfirmed, ForgetSelectionError, InvalidInput) as exc:
        # The count, the rows left out or the reference: nothing was purged; the same
        # preview again, with the operator's ticks and what they typed, says why.
        return _preview_page(request, principal, parsed, apply_form, refused=_sentence(str(exc)))
    except (RecordNotFound, EpisodeNotFound, RecordStateError, SelectorError) as exc:
        # e.g. someone forgot the same records a moment ago: nothing matches now.
        apply_form.add_error(None, f"Nothing was forgotten: {exc}")
        return _forget_form_page(request, parsed, apply_form, status=409)
    if receipt.get("format") == services.FORGET_BUNDLE_FORMAT:
        receipts = receipt["receipts"]
        count = sum(len(r["purged_record_ids"]) for r in receipts)
        messages.success(
            request,
            f"Forgot {count} record{'s' if count != 1 else ''} at {parsed} and below, in "
            f"{len(receipts)} scope{'s' if len(receipts) != 1 else ''}: one receipt per scope, "
            "bundled. Keep this bundle.",
        )
        return redirect(
            "memory:forget_bundle", event_id=receipt["closing_proof"]["event"]["event_id"]
        )
    count = len(receipt["purged_record_ids"])
    texts = len(receipt["purged_episode_ids"])
    messages.success(
        request,
        f"Forgot {count} record{'s' if count != 1 else ''} and the text of {texts} stored "
        f"message{'s' if texts != 1 else ''} at {parsed}: content, fact keys and message text "
        "are purged. Keep this receipt.",
    )
    return redirect("memory:receipt", event_id=receipt["audit_event_id"])


# -- receipts ----------------------------------------------------------------------


def _get_receipt(principal: Principal, event_id: str) -> dict[str, Any]:
    # An unknown receipt is RecordNotFound: the decorator's 404.
    return selectors.get_receipt(principal, event_id)


@never_cache
@require_GET
@dashboard_view
def receipt(request: HttpRequest, event_id: str) -> HttpResponse:
    """A deletion receipt, verified against the scope's audit chain on the page."""
    principal = principal_for(request)
    entry = selectors.get_receipt_entry(principal, event_id)
    document = entry.receipt
    # The selector has checked that the operator may read this receipt's scope;
    # verifying reads only the one audit event it names (no content), so it
    # runs as the trusted in-process caller rather than needing the audit role.
    failures = verify_deletion_receipt(document, principal=SYSTEM)
    return render_page(
        request,
        "memory/receipt.html",
        {
            "receipt": document,
            "reference": entry.reference,
            "bundle_event_id": entry.bundle_event_id,
            "scope": Scope.parse(document["subject_id"]),
            "failures": failures,
            "receipt_json": json.dumps(document, indent=2, sort_keys=True),
            "verifier_key": audit_selectors.published_verifier_key(),
        },
    )


@never_cache
@require_GET
@dashboard_view
def receipt_download(request: HttpRequest, event_id: str) -> HttpResponse:
    """The receipt as a JSON file (its ``receipt_sha256`` covers the fields, not the layout)."""
    document = _get_receipt(principal_for(request), event_id)
    response = HttpResponse(
        json.dumps(document, indent=2, sort_keys=True) + "\n",
        content_type="application/json",
    )
    response["Content-Disposition"] = f'attachment; filename="deletion-receipt-{event_id}.json"'
    return response


@never_cache
@require_GET
@dashboard_view
def forget_bundle(request: HttpRequest, event_id: str) -> HttpResponse:
    """A forget's bundle: its scope, reference and one receipt per scope, and how to check it."""
    bundle = selectors.get_forget_bundle(principal_for(request), event_id)
    return render_page(
        request,
        "memory/forget_bundle.html",
        {
            "bundle": bundle,
            "event_id": event_id,
            "scope": Scope.parse(bundle["scope"]),
            "receipts": [
                {
                    "subject_id": r["subject_id"],
                    "audit_event_id": r["audit_event_id"],
                    "records": len(r["purged_record_ids"]),
                    "episodes": len(r["purged_episode_ids"]),
                }
                for r in bundle["receipts"]
            ],
            "verifier_key": audit_selectors.published_verifier_key(),
        },
    )


@never_cache
@require_GET
@dashboard_view
def forget_bundle_download(request: HttpRequest, event_id: str) -> HttpResponse:
    """The bundle as a JSON file, for ``tools/verify_audit.py --forget-bundle``."""
    bundle = selectors.get_forget_bundle(principal_for(request), event_id)
    response = HttpResponse(
        json.dumps(bundle, indent=2, sort_keys=True) + "\n", content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="forget-bundle-{event_id}.json"'
    return response


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def receipt_verify(request: HttpRequest) -> HttpResponse:
    """Verify a downloaded receipt: its digest, and the audit event it names in its scope's chain."""
    principal = principal_for(request)
    form = ReceiptVerifyForm(request.POST or None, request.FILES or None)
    context: dict[str, Any] = {"form": form, "checked": False}
    status = 200
    if request.method == "POST":
        if not form.is_valid():
            status = 400
        else:
            document = form.cleaned_data["receipt"]
            failures = receipt_shape_failures(document)
            if not failures:
                subject = document["subject_id"]
                # Only receipts of scopes the operator may read are checked against
                # the chain, so this form cannot probe other tenants' chains.
                try:
                    readable = access.may(principal, access.READ, subject)
                except ValueError:
                    readable = False
                if not readable:
                    failures = [
                        f"the receipt names scope {subject[:200]!r}, which is not a valid scope "
                        "or not one your grants reach, so it was not checked against a chain"
                    ]
                else:
                    failures = verify_deletion_receipt(document, principal=SYSTEM)
            context.update(checked=True, failures=failures, receipt=document)
            status = 200 if not failures else 422
    return render_page(request, "memory/receipt_verify.html", context, status=status)


# -- a record's history (issue 33 item 4) -------------------------------------------------


@never_cache
@require_GET
@dashboard_view
def record_history(request: HttpRequest, record_id: str) -> HttpResponse:
    """A record's history as a timeline: each value its lineage held, when, from which
    message, and who promoted, corrected, rejected or forgot it."""
    principal = principal_for(request)
    history = selectors.record_history(principal, record_id)  # out of reach: the 404
    return render_page(
        request,
        "memory/record_history.html",
        {
            "history": history,
            "record": history.record,
            "scope": Scope.parse(history.record.scope),
            "history_limit": selectors.HISTORY_EVENTS,
        },
    )
