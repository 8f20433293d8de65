"""Project-level views: the overview (home page) and the health check."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from aetnaweb.dashboard import dashboard_view, principal_for, render_page
from aetnaweb.overview import build_overview


@require_GET
@dashboard_view
def home(request: HttpRequest) -> HttpResponse:
    """The overview: per visible tenant, what needs a person, chain health and recent activity."""
    principal = principal_for(request)
    overview = build_overview(principal, user=request.user)
    return render_page(
        request,
        "home.html",
        {"overview": overview, "now": timezone.now()},
        partial="tenants",
    )


@require_GET
@login_not_required
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness and database reachability, for load balancers; reveals nothing else."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return JsonResponse({"status": "ok"})
