"""A job's page (progress polled by htmx while it runs, then its result) and its file's download.

Starting a job is the owning app's view (an export on the Exports page, a
reindex or retention run on the Maintenance page); the page's retry button
posts the same request there again. Both views answer 404 for a job the
signed-in person may not see (:mod:`jobs.selectors`).
"""

from __future__ import annotations

from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from aetnaweb.dashboard import dashboard_view, principal_for, render_page
from jobs import selectors
from jobs.models import Job


def _visible(request: HttpRequest, job_id: int) -> Job:
    try:
        return selectors.get_job(principal_for(request), job_id)
    except Job.DoesNotExist as exc:
        raise Http404("no such job") from exc


@never_cache
@require_GET
@dashboard_view
def detail(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job's status, progress and result; htmx polls the ``progress`` fragment every second."""
    job = _visible(request, job_id)
    if job.kind == Job.Kind.SUBJECT_EXPORT:
        return redirect("memory:subject_export", job_id=job.pk)
    counts = sorted((job.result.get("removed") or {}).items()) if job.result else []
    context = {"job": job, "counts": counts, "file_ready": selectors.file_path(job) is not None}
    return render_page(request, "jobs/detail.html", context, partial="progress")


@never_cache
@require_GET
@dashboard_view
def download(request: HttpRequest, job_id: int) -> FileResponse | HttpResponseRedirect:
    """The finished export file, to its requester only, while they still audit its scope."""
    job = _visible(request, job_id)
    if job.kind == Job.Kind.SUBJECT_EXPORT:
        # Its own page serves it, and says when it expired (the memory app's rule).
        return redirect("memory:subject_export_download", job_id=job.pk)
    path = selectors.file_path(job)
    if path is None:
        raise Http404("this job has no file (not finished, or removed by retention)")
    response = FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=f"audit-export-{job.pk}.jsonl",
        content_type="application/jsonl",
    )
    # The digest shown on the page, for a client that wants to check what it got.
    response["X-Content-SHA256"] = job.file_sha256
    return response
