"""Project-level views: the overview (home page), the top-bar search, the health check and
the 500/503 handler."""

from __future__ import annotations

import json
import logging
import re
import sys
import unicodedata
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from actions import selectors as action_selectors
from aetnaweb.access import AccessDenied
from aetnaweb.api import API_PREFIX
from aetnaweb.dashboard import dashboard_view, principal_for, render_page
from aetnaweb.faults import RETRY_AFTER_SECONDS, database_fault
from aetnaweb.overview import build_overview
from aetnaweb.scopes import Scope, ScopeError
from audit import selectors as audit_selectors
from memory import selectors as memory_selectors
from memory import vectors
from memory.errors import QueryError
from memory.forms import MemorySearchForm

SEARCH_RESULTS = 20
MAX_SEARCH_CHARS = 100
SNIPPET_CHARS = 220
MIN_PREFIX_HEX = 4  # "mem_3f2a": shorter prefixes would list whatever comes first
# An ID or the start of one: the kind, an underscore, then hex digits.
ID_PREFIX_RE = re.compile(r"(mem|act|aud|ret)_([0-9a-f]{0,32})")
SCOPE_NAME_RE = re.compile(r"[a-z0-9._-]+")


@require_GET
@dashboard_view
def home(request: HttpRequest) -> HttpResponse:
    """The overview: per visible tenant, what needs a person, chain health and recent activity."""
    principal = principal_for(request)
    # Whose activity charts to draw; anything not one of theirs falls back to the first tenant.
    wanted = request.GET.get("tenant", "").strip()[:64] or None
    overview = build_overview(principal, user=request.user, activity_tenant=wanted)
    return render_page(
        request,
        "home.html",
        {"overview": overview, "now": timezone.now(), "semantic_status": vectors.status()},
        partial="tenants",
    )


@require_GET
@login_not_required
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness, database reachability and the recall mode; reveals nothing else.

    ``recall`` is ``hybrid`` (full-text + semantic) or ``lexical`` (the model
    or the vector index is unavailable: recall still works, without meaning
    matches). Why it is lexical is on the overview page, behind login.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    recall = "hybrid" if vectors.status().available else "lexical"
    return JsonResponse({"status": "ok", "recall": recall})


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: a database fault is a 503 saying what is wrong; anything else a 500.

    Called by Django while the exception is being handled, from a view or from
    any middleware (a session that cannot be saved on a full disk included).
    Under ``/api/v1/`` the answer is the API's JSON error shape.
    """
    fault = database_fault(sys.exc_info()[1])
    is_api = request.path.startswith(API_PREFIX)
    if fault is None:
        if is_api:
            return _json_error(
                500, "internal_error", "the server failed; the error has been logged"
            )
        return HttpResponse(render_to_string("500.html"), status=500)
    logging.getLogger("aetnaweb.faults").error("database fault on %s: %s", request.path, fault)
    if is_api:
        response = _json_error(503, "service_unavailable", fault)
    else:
        # No request context: the page must render without touching the database.
        response = HttpResponse(render_to_string("503.html", {"fault": fault}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def _json_error(status: int, error: str, detail: str) -> HttpResponse:
    body = {"error": error, "field": None, "detail": detail}
    return HttpResponse(json.dumps(body), status=status, content_type="application/json")


def _parses_as_scope(text: str) -> bool:
    try:
        Scope.parse(text)
    except ScopeError:
        return False
    return True


def _id_hits(principal: Any, kind: str, prefix: str) -> list[dict[str, str]]:
    """What an ID (or prefix) of ``kind`` names, among what the principal may see."""
    if kind == "mem":
        return [
            {
                "kind": "Record",
                "id": r.record_id,
                "label": f"{r.scope} · {r.status}",
                "url": reverse("memory:record", args=[r.record_id]),
            }
            for r in memory_selectors.records_by_id_prefix(principal, prefix, limit=SEARCH_RESULTS)
        ]
    if kind == "ret":
        return [
            {
                "kind": "Recall",
                "id": r.retrieval_id,
                "label": f"{r.scope} · by {r.actor}",
                "url": reverse("memory:retrieval", args=[r.retrieval_id]),
            }
            for r in memory_selectors.retrievals_by_id_prefix(
                principal, prefix, limit=SEARCH_RESULTS
            )
        ]
    if kind == "act":
        return [
            {
                "kind": "Transaction",
                "id": t["transaction_id"],
                "label": f"{t['subject_id']} · {t['state']}",
                "url": reverse("actions:detail", args=[t["transaction_id"]]),
            }
            for t in action_selectors.transactions_by_id_prefix(
                principal, prefix, limit=SEARCH_RESULTS
            )
        ]
    return [
        {
            "kind": "Audit event",
            "id": e.event_id,
            "label": f"#{e.sequence} {e.event_type} · {e.subject_id}",
            "url": reverse("audit:event", args=[e.event_id]),
        }
        for e in audit_selectors.events_by_id_prefix(principal, prefix, limit=SEARCH_RESULTS)
    ]


def _search_text(raw: str) -> str:
    # As the query above, but keeping case: a session ID is matched exactly.
    return "".join(
        ch
        for ch in unicodedata.normalize("NFKC", raw[: MAX_SEARCH_CHARS * 2]).strip()
        if unicodedata.category(ch)[0] != "C"
    )[:MAX_SEARCH_CHARS]


def highlighted(text: str, needle: str, *, width: int = SNIPPET_CHARS) -> list[tuple[str, bool]]:
    """``text`` cut to about ``width`` characters around the first match of ``needle``, as
    (part, is_match) pairs: the template escapes each part and marks the matches, so no
    stored text is ever marked safe."""
    folded, key = text.casefold(), needle.casefold()
    # casefold can change lengths (ß -> ss); then only the cut is offered, unmarked.
    if not key or len(folded) != len(text):
        return [(text[:width] + ("…" if len(text) > width else ""), False)]
    first = folded.find(key)
    start = 0 if first < width // 3 else first - width // 3
    end = min(len(text), start + width)
    window, window_folded = text[start:end], folded[start:end]
    parts: list[tuple[str, bool]] = [("…", False)] if start else []
    at = 0
    while key and (found := window_folded.find(key, at)) != -1:
        if found > at:
            parts.append((window[at:found], False))
        parts.append((window[found : found + len(key)], True))
        at = found + len(key)
    if at < len(window):
        parts.append((window[at:], False))
    if end < len(text):
        parts.append(("…", False))
    return parts


def _memory_hits(request: HttpRequest, principal: Any, text: str, context: dict[str, Any]) -> None:
    """Records and source messages matching ``text``, with the page's filters."""
    form = MemorySearchForm(request.GET)
    context["filter_form"] = form
    if not form.is_valid():
        context["problem"] = " ".join(
            str(error) for errors in form.errors.values() for error in errors
        )
        return
    try:
        found = memory_selectors.search_memory(
            principal, text, **form.selector_filters(timezone.now()), limit=SEARCH_RESULTS
        )
    except QueryError as exc:
        context["problem"] = str(exc)
        return
    except AccessDenied:
        # A scope filter out of reach finds nothing, as a scope with no match would.
        found = memory_selectors.MemorySearch([], [], [], 0, False)
    context["found"] = found
    context["record_hits"] = [
        {"record": record, "parts": highlighted(record.content, text)} for record in found.records
    ]
    context["episode_hits"] = [
        {"episode": episode, "parts": highlighted(episode.text, text)} for episode in found.episodes
    ]


@require_GET
@dashboard_view
def search(request: HttpRequest) -> HttpResponse:
    """The top-bar box: jump to a ``mem_``/``act_``/``aud_``/``ret_`` ID (or the one match of a
    prefix), or find records and source messages by content, fact key, session ID or ID,
    and scopes by tenant or user name, in everything the person may read."""
    principal = principal_for(request)
    raw = request.GET.get("q", "")
    # Folded so a pasted fullwidth or upper-case ID still matches; invisible
    # characters (a zero-width space from a chat client) are dropped.
    query = "".join(
        ch
        for ch in unicodedata.normalize("NFKC", raw[: MAX_SEARCH_CHARS * 2]).strip().lower()
        if unicodedata.category(ch)[0] != "C"
    )[:MAX_SEARCH_CHARS]
    context: dict[str, Any] = {
        "query": query,
        "hits": [],
        "scopes": [],
        "problem": "",
        "filter_fields": MemorySearchForm.base_fields,
    }
    match = ID_PREFIX_RE.fullmatch(query)
    if match and len(match.group(2)) >= MIN_PREFIX_HEX:
        hits = _id_hits(principal, match.group(1), query)
        if len(hits) == 1:
            return HttpResponseRedirect(hits[0]["url"])
        context["hits"] = hits
        context["searched"] = "id"
    elif match:
        context["problem"] = (
            f"Type at least {MIN_PREFIX_HEX} characters after “{match.group(1)}_” to look an ID up."
        )
    elif query.count(":") == 2 and _parses_as_scope(raw.strip()):
        return HttpResponseRedirect(reverse("memory:scope", args=[raw.strip()]))
    elif query:
        if SCOPE_NAME_RE.fullmatch(query):
            context["scopes"] = audit_selectors.scopes_matching(
                principal, query, limit=SEARCH_RESULTS
            )
        context["searched"] = "memory"
        _memory_hits(request, principal, _search_text(raw), context)
    status = 400 if context["problem"] else 200
    return render_page(request, "search.html", context, status=status)


@require_GET
def api_docs(request: HttpRequest) -> HttpResponse:
    """The interactive API reference (Swagger UI) for signed-in people.

    Its scripts and styles are the copies django-ninja ships, served from our
    own static files under the CSP (no CDN): the page works offline and loads
    nothing from elsewhere. "Try it out" sends the bearer token typed into
    "Authorize", never the session cookie's rights.
    """
    return render(
        request,
        "api_docs.html",
        {
            "swagger_settings": {
                "url": reverse("api:openapi-json"),
                "dom_id": "#swagger-ui",
                # Deep links wrap each path in a link inside the summary button: nested controls
                # that keyboard and screen-reader users cannot reach (axe nested-interactive).
                "deepLinking": False,
                "validatorUrl": None,  # the default posts the schema to swagger.io
                "persistAuthorization": False,
            }
        },
    )
