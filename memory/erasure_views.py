"""Erase a person from the dashboard (issue 32): the preview page with per-scope counts and the
typed confirmation, the erasure's progress page, and its certificate's download; and the
legal hold page of a scope (set, lift). Exporting a person: :mod:`memory.subject_export_views`.

Translation only: the service (:mod:`memory.services.erasure`) checks who may
erase and every rule; a subtree or erasure out of reach is a 404.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from aetnaweb import access
from aetnaweb.dashboard import dashboard_view, principal_for, render_page
from aetnaweb.scopes import Scope
from jobs import selectors as job_selectors
from jobs.models import Job
from memory.errors import LegalHoldError, SubjectErasureError
from memory.forms import EraseSubjectForm, LegalHoldForm
from memory.services.erasure import start_subject_erasure, subject_erasure_preview
from memory.services.holds import legal_holds, lift_legal_hold, set_legal_hold


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def erase_subject(request: HttpRequest, scope: str) -> HttpResponse:
    """GET: what erasing this subtree would purge, per scope, and the confirmation form.
    POST: start the erasure and go to its progress page."""
    principal = principal_for(request)
    parsed = Scope.parse(scope)
    # Refused (AccessDenied: 404; above one person: the refusal page) before any form shows.
    preview = subject_erasure_preview(subtree=parsed, principal=principal)
    form = EraseSubjectForm(request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                job = start_subject_erasure(
                    subtree=parsed,
                    reference=form.cleaned_data["reference"],
                    confirmation=form.cleaned_data["confirm"],
                    principal=principal,
                )
            except SubjectErasureError as exc:
                form.add_error(None, f"Nothing was erased: {exc}")
            else:
                return redirect("memory:erasure", job_id=job.pk)
        status = 400
    context = {"scope": parsed, "preview": preview, "form": form}
    return render_page(request, "memory/erase_subject.html", context, status=status)


def _erasure(request: HttpRequest, job_id: int) -> Job:
    job = Job.objects.filter(pk=job_id, kind=Job.Kind.ERASURE).first()
    if job is None or not job.scope:
        raise Http404("no such erasure")
    if not access.may_erase_subject(principal_for(request), job.scope):
        raise Http404("no such erasure")
    return job


@never_cache
@require_GET
@dashboard_view
def erasure(request: HttpRequest, job_id: int) -> HttpResponse:
    """The erasure's progress (htmx polls the ``progress`` fragment), then counts and certificate."""
    job = _erasure(request, job_id)
    scopes = sorted((job.result.get("scopes") or {}).items()) if job.result else []
    context = {
        "job": job,
        "scopes": scopes,
        "file_ready": job_selectors.file_path(job) is not None,
    }
    return render_page(request, "memory/erasure.html", context, partial="progress")


@never_cache
@require_GET
@dashboard_view
def certificate_download(request: HttpRequest, job_id: int) -> FileResponse:
    """The erasure certificate, to admins of the erased subtree."""
    job = _erasure(request, job_id)
    path = job_selectors.file_path(job)
    if path is None:
        raise Http404("this erasure has no certificate yet")
    response = FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=f"erasure-certificate-{job.pk}.json",
        content_type="application/json",
    )
    response["X-Content-SHA256"] = job.file_sha256
    return response


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def legal_hold(request: HttpRequest, scope: str) -> HttpResponse:
    """The holds keeping this scope; set one here, or lift the one set at exactly this scope."""
    principal = principal_for(request)
    parsed = Scope.parse(scope)
    if not access.may_erase_subject(principal, parsed):  # the services' rule, for the page
        raise Http404("not found")
    form = LegalHoldForm(request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST":
        try:
            if request.POST.get("action") == "lift":
                lift_legal_hold(scope=parsed, principal=principal)
                messages.success(request, f"The legal hold at {parsed} is lifted.")
                return redirect("memory:legal_hold", scope=str(parsed))
            if form.is_valid():
                set_legal_hold(
                    scope=parsed, reference=form.cleaned_data["reference"], principal=principal
                )
                messages.success(
                    request, f"Legal hold set at {parsed}: nothing there or below is purged now."
                )
                return redirect("memory:legal_hold", scope=str(parsed))
        except LegalHoldError as exc:
            form.add_error(None, f"Nothing was changed: {exc}")
        status = 400
    holds = legal_holds(principal=principal, scope=parsed)
    context = {
        "scope": parsed,
        "holds": holds,
        "own": next((h for h in holds if h.scope == str(parsed)), None),
        "form": form,
    }
    return render_page(request, "memory/legal_hold.html", context, status=status)
