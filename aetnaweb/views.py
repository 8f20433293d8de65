"""Project-level views: the overview (home page), the health check and the 500/503 handler."""

from __future__ import annotations

import json
import logging
import sys

from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_GET

from aetnaweb.api import API_PREFIX
from aetnaweb.dashboard import dashboard_view, principal_for, render_page
from aetnaweb.faults import RETRY_AFTER_SECONDS, database_fault
from aetnaweb.overview import build_overview
from memory import vectors


@require_GET
@dashboard_view
def home(request: HttpRequest) -> HttpResponse:
    """The overview: per visible tenant, what needs a person, chain health and recent activity."""
    principal = principal_for(request)
    overview = build_overview(principal, user=request.user)
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
