"""The sign-in lockouts page: who is locked out or slowed right now, and a way to clear one.

Only platform admins open it (the rule lives in :mod:`aetnaweb.lockouts`);
anyone else gets the same 404 as a missing page.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from aetnaweb import lockouts
from aetnaweb.dashboard import dashboard_view, principal_for

MAX_ROWS = 200


@never_cache
@require_GET
@dashboard_view
def lockout_list(request: HttpRequest) -> HttpResponse:
    rows = list(lockouts.current_throttles(principal_for(request))[:MAX_ROWS])
    limits = lockouts.thresholds()
    return render(
        request,
        "access/lockouts.html",
        {"rows": rows, "limits": limits, "now": timezone.now(), "max_rows": MAX_ROWS},
    )


@require_POST
@dashboard_view
def lockout_clear(request: HttpRequest, throttle_id: int) -> HttpResponse:
    try:
        row = lockouts.clear_throttle(principal=principal_for(request), throttle_id=throttle_id)
    except lockouts.LockoutError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Cleared: sign-in for {row.kind} {row.label} is accepted again.")
    return redirect("lockouts:list")
