"""Export a person from the dashboard (issue 32, item 2): the form that starts the export job,
the job's progress page, and the download while the file is kept.

Translation only: :mod:`memory.services.subject_export` checks who may export
and every rule; a subtree or export out of reach is a 404. An expired export
answers 410 with a page saying what to do next.
"""

from __future__ import annotations

from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from aetnaweb import access
from aetnaweb.access import AccessDenied
from aetnaweb.dashboard import dashboard_view, principal_for, render_page
from aetnaweb.scopes import Scope
from jobs.models import Job
from memory.errors import SubjectExportError, SubjectExportExpired
from memory.forms import SubjectExportForm
from memory.services.subject_export import (
    expires_at,
    get_subject_export,
    is_expired,
    keep_days,
    start_subject_export,
    subject_export_file,
    subject_exports,
)


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def export_subject(request: HttpRequest, scope: str) -> HttpResponse:
    """GET: the form and this subtree's recent exports. POST: start an export job and go to it."""
    principal = principal_for(request)
    parsed = Scope.parse(scope)
    if not access.may_erase_subject(principal, parsed):  # the service's rule, for the form
        raise Http404("not found")
    form = SubjectExportForm(request.POST if request.method == "POST" else None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                job = start_subject_export(
                    subtree=parsed, reference=form.cleaned_data["reference"], principal=principal
                )
            except SubjectExportError as exc:
                form.add_error(None, f"Nothing was exported: {exc}")
            else:
                return redirect("memory:subject_export", job_id=job.pk)
        status = 400
    exports = [
        (job, expires_at(job), is_expired(job))
        for job in subject_exports(subtree=parsed, principal=principal)
    ]
    context = {"scope": parsed, "form": form, "exports": exports, "keep_days": keep_days()}
    return render_page(request, "memory/export_subject.html", context, status=status)


def _export(request: HttpRequest, job_id: int) -> Job:
    try:
        return get_subject_export(job_id=job_id, principal=principal_for(request))
    except AccessDenied as exc:
        raise Http404("no such export") from exc


@never_cache
@require_GET
@dashboard_view
def progress(request: HttpRequest, job_id: int) -> HttpResponse:
    """The export's progress (htmx polls the ``progress`` fragment), then counts and download."""
    job = _export(request, job_id)
    context = {"job": job, "expires_at": expires_at(job), "expired": is_expired(job)}
    return render_page(request, "memory/subject_export.html", context, partial="progress")


@never_cache
@require_GET
@dashboard_view
def download(request: HttpRequest, job_id: int) -> HttpResponseBase:
    """The export's ZIP file while it is kept; 410 with the next step once it expired."""
    job = _export(request, job_id)
    try:
        job, path = subject_export_file(job_id=job.pk, principal=principal_for(request))
    except SubjectExportExpired as exc:
        context = {"job": job, "reason": str(exc)}
        return render_page(request, "memory/subject_export_gone.html", context, status=410)
    except SubjectExportError:
        return redirect("memory:subject_export", job_id=job.pk)
    response = FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=f"subject-export-{job.pk}.zip",
        content_type="application/zip",
    )
    response["X-Content-SHA256"] = job.file_sha256
    return response
