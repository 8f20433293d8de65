"""The Maintenance page: retention runs and policies, semantic reindexes, queued for the task worker.

Admins only (of some scope for a reindex there; of the whole platform for
retention and for reindexing every scope); anyone else gets a 404. The work
runs in ``manage.py db_worker``, never in the web process; each start
redirects to the job's page, which shows progress and the result.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from aetnaweb import access, retention
from aetnaweb.access import AccessDenied, Principal
from aetnaweb.dashboard import dashboard_view, principal_for, render_page
from aetnaweb.maintenance_forms import MemoryRetentionForm, ReindexForm, RetentionForm
from aetnaweb.scopes import Scope
from jobs import selectors as job_selectors
from jobs.models import Job
from jobs.services import JobError
from memory import vector_cells, vectors
from memory.errors import RetentionPolicyError
from memory.reindexing import start_reindex
from memory.services.retention import (
    remove_retention_policy,
    retention_preview,
    set_retention_policy,
)

RECENT = 10


def _require_some_admin(principal: Principal) -> None:
    if not access.administered_scopes(principal):
        raise AccessDenied(f"{principal.label} administers no scope")


def _page(
    request: HttpRequest,
    *,
    reindex_form: ReindexForm | None = None,
    policy_form: MemoryRetentionForm | None = None,
    status: int = 200,
) -> HttpResponse:
    principal = principal_for(request)
    _require_some_admin(principal)
    platform_admin = access.may_administer(principal, Scope.platform())
    context: dict[str, Any] = {
        "platform_admin": platform_admin,
        "administered": [str(scope) for scope in access.administered_scopes(principal)],
        "policy": retention.policy(),
        "retention_form": RetentionForm(),
        "retention_jobs": job_selectors.recent_jobs(
            principal, kind=Job.Kind.RETENTION, limit=RECENT
        ),
        "reindex_form": reindex_form or ReindexForm(),
        "reindex_jobs": job_selectors.recent_jobs(principal, kind=Job.Kind.REINDEX, limit=RECENT),
        "semantic": vectors.status(),
        "cells_from": f"{vector_cells.TRAIN_AT:,}",
        # Memory content: each policy the operator administers, what the next run
        # purges under it, when it last ran, and what legal holds keep.
        "memory_retention": retention_preview(principal=principal),
        "policy_form": policy_form or MemoryRetentionForm(),
    }
    last = context["retention_jobs"][0] if context["retention_jobs"] else None
    context["last_retention"] = last
    context["last_counts"] = sorted((last.result.get("removed") or {}).items()) if last else []
    return render_page(request, "maintenance/index.html", context, status=status)


@never_cache
@require_GET
@dashboard_view
def index(request: HttpRequest) -> HttpResponse:
    return _page(request)


@require_POST
@dashboard_view
def retention_start(request: HttpRequest) -> HttpResponse:
    """Queue a retention run (platform admins); the job's page shows what it removed."""
    principal = principal_for(request)
    form = RetentionForm(request.POST)
    form.is_valid()  # one optional checkbox: any input is valid
    job = retention.start_retention(
        principal=principal, dry_run=bool(form.cleaned_data.get("dry_run"))
    )
    return redirect("jobs:detail", job_id=job.pk)


@require_POST
@dashboard_view
def memory_retention_policy(request: HttpRequest) -> HttpResponse:
    """Set a retention policy (or remove it, with ``remove``); admins of the subtree."""
    principal = principal_for(request)
    _require_some_admin(principal)
    form = MemoryRetentionForm(request.POST)
    if not form.is_valid():
        return _page(request, policy_form=form, status=400)
    data = form.cleaned_data
    try:
        if "remove" in request.POST:
            removed = remove_retention_policy(
                scope=data["scope"], target=data["target"], principal=principal
            )
            text = f"Removed the policy for {removed.target} at {removed.scope}."
        else:
            if data["keep_days"] is None:
                form.add_error("keep_days", "Give the number of days to keep it.")
                return _page(request, policy_form=form, status=400)
            made = set_retention_policy(
                scope=data["scope"],
                target=data["target"],
                keep_days=data["keep_days"],
                principal=principal,
            )
            text = f"Keeping {made.target} at {made.scope} and below for {made.keep_days} days."
    except RetentionPolicyError as exc:
        form.add_error(None, str(exc))
        return _page(request, policy_form=form, status=400)
    except AccessDenied:
        form.add_error("scope", f"You do not administer {data['scope']}.")
        return _page(request, policy_form=form, status=400)
    messages.success(request, text)
    return redirect(reverse("maintenance:index") + "#memory-retention-heading")


@require_POST
@dashboard_view
def reindex_start(request: HttpRequest) -> HttpResponse:
    """Queue a semantic reindex of one scope (its admins) or every scope (platform admins)."""
    principal = principal_for(request)
    _require_some_admin(principal)
    form = ReindexForm(request.POST)
    if not form.is_valid():
        return _page(request, reindex_form=form, status=400)
    try:
        job = start_reindex(principal=principal, scope=form.cleaned_data["scope"] or None)
    except JobError as exc:
        form.add_error("scope", str(exc))
        return _page(request, reindex_form=form, status=400)
    return redirect("jobs:detail", job_id=job.pk)
