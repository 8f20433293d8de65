"""The audit pages of the dashboard: explorer, verification runs, checkpoints, evidence upload.

Every view parses its input with a form, checks the principal through
``aetnaweb.access`` (READ to look, AUDIT to verify, checkpoint or export),
reads through selectors that filter by grant, and writes only through
``audit.services``. Anything outside the principal's grants is a 404.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from aetnaweb import access
from aetnaweb.access import AccessDenied, Principal
from aetnaweb.dashboard import (
    KeyPage,
    dashboard_view,
    invalid_scope_response,
    page_key,
    principal_for,
    render_page,
)
from aetnaweb.scopes import Scope, ScopeError
from audit import merkle, selectors, tree
from audit.canonical import canonical_json
from audit.chain import row_event_hash
from audit.checkpoints import (
    CheckpointError,
    read_checkpoint_lines,
    stored_document_failures,
    verify_checkpoints,
)
from audit.errors import AuditError
from audit.exports import ExportError, start_export
from audit.forms import (
    EventFilterForm,
    EvidenceUpload,
    EvidenceUploadForm,
    ExportRequestForm,
    VerifyChainForm,
)
from audit.models import AuditEvent, Checkpoint, VerificationRun
from audit.readable import event_summary
from audit.receipts import verify_deletion_receipt
from audit.selectors import readable
from audit.services import create_checkpoint, start_verification_run
from audit.status import ChainStatus, may_see_checkpoint, status_from_run
from audit.verification import COLUMNS
from jobs import selectors as job_selectors
from jobs.models import Job

EVENTS_PER_PAGE = 50
CHECKPOINTS_PER_PAGE = 20
CHECKPOINT_SCAN_LIMIT = 500  # rows examined per page for a principal who may not see them all
RECENT_RUNS = 50

# -- helpers ---------------------------------------------------------------------------


def _require_anywhere(principal: Principal, capability: str) -> None:
    """A page that lists "what you may see" still needs the capability somewhere (else 404)."""
    if not access.has_capability_anywhere(principal, capability):
        raise AccessDenied(f"{principal.label} holds no {capability} grant")


def _run_scope(run: VerificationRun) -> Scope:
    return Scope.parse(run.scope) if run.scope else Scope.platform()


def _visible_run(principal: Principal, run_id: int) -> VerificationRun:
    try:
        return selectors.get_verification_run(principal, run_id)
    except VerificationRun.DoesNotExist as exc:
        raise Http404("no such run") from exc


def _scopes_overlap(a: Scope, b: Scope) -> bool:
    return a.covers(b) or b.covers(a)


def latest_status(principal: Principal, scope: Scope | None) -> ChainStatus | None:
    """The verdict of the newest finished run that touches ``scope`` (or anything visible).

    Failures are narrowed to chains the principal may read and, with a scope,
    to that scope's subtree; ``None`` when no run applies.
    """
    for run in VerificationRun.objects.order_by("-started_at", "-id")[:RECENT_RUNS]:
        if run.is_running:
            continue
        run_scope = _run_scope(run)
        if not access.may(principal, access.READ, run_scope):
            continue
        if scope is not None and not _scopes_overlap(run_scope, scope):
            continue
        status = status_from_run(run, principal)
        if scope is not None and status.state == "failed":
            inside = tuple(s for s in status.failed_subjects if scope.covers(Scope.parse(s)))
            if not inside:
                return ChainStatus("passed", run)
            bad: list[int] = [
                f["first_bad_sequence"]
                for f in run.failures
                if isinstance(f, dict)
                and f.get("subject_id") in inside
                and isinstance(f.get("first_bad_sequence"), int)
            ]
            return ChainStatus(
                "failed", run, first_bad_sequence=min(bad) if bad else None, failed_subjects=inside
            )
        return status
    return None


@dataclass(frozen=True)
class VerifyTarget:
    """One scope the principal may verify, with its last verdict."""

    scope: str
    label: str
    status: ChainStatus | None

    @property
    def status_dom_id(self) -> str:
        return chain_status_dom_id(self.scope)


def chain_status_dom_id(scope: str) -> str:
    """The HTML id of a scope's "last verified" badge in the explorer's Verify list.

    A finished run's card replaces that badge out of band, so the list never says
    "never verified" beside a card that says "passed". Hashed: scopes hold ``:`` and ``*``.
    """
    return "chain-status-" + hashlib.sha256(scope.encode()).hexdigest()[:12]


def verify_targets(principal: Principal, current: Scope | None) -> list[VerifyTarget]:
    """The scopes offered a "Verify chain" button: the filtered scope, then each AUDIT grant."""
    scopes: list[Scope] = []
    if current is not None and access.may(principal, access.AUDIT, current):
        scopes.append(current)
    for granted in access.granted_scopes(principal, access.AUDIT):
        if granted not in scopes:
            scopes.append(granted)
    return [
        VerifyTarget(
            scope=str(scope),
            label="every chain" if scope.is_platform else str(scope),
            status=latest_status(principal, scope),
        )
        for scope in scopes
    ]


RETRIEVAL_ID_RE = re.compile(r"ret_[0-9a-f]{32}")


def recall_retrieval_id(event: AuditEvent) -> str | None:
    """The ``ret_`` ID a ``memory.recall`` event names, for a link to the recall's page.

    Only a well-formed ID is linked: a payload is evidence, not trusted input.
    """
    if event.event_type != "memory.recall":
        return None
    try:
        payload = json.loads(event.payload)
    except ValueError:
        return None
    value = payload.get("retrieval_id") if isinstance(payload, dict) else None
    return value if isinstance(value, str) and RETRIEVAL_ID_RE.fullmatch(value) else None


def _pretty_payload(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False)
    except ValueError:
        return text  # shown as stored: a payload that is not JSON is itself evidence


# -- explorer --------------------------------------------------------------------------


@require_GET
@dashboard_view
def explorer(request: HttpRequest) -> HttpResponse:
    """Events newest first, filtered, paginated by sequence; a verify control and red banner."""
    principal = principal_for(request)
    _require_anywhere(principal, access.READ)
    type_counts = selectors.event_type_counts(principal)
    form = EventFilterForm(request.GET or None, type_counts=type_counts)
    filters: dict[str, Any] = {}
    form_ok = not form.is_bound or form.is_valid()
    if form.is_bound and form_ok:
        filters = form.filters()
    scope = Scope.parse(filters["scope"]) if filters.get("scope") else None
    if scope is not None:
        access.require(principal, access.READ, scope)
    before = page_key(request)
    if form_ok:
        page = _event_page(principal, filters, before=before)
    else:
        # An invalid filter shows nothing: the unfiltered list under the error
        # would read as the answer to the question that was asked.
        page = KeyPage(items=[], next_key=None, first_page=True)
    events = [
        {
            "event": event,
            "payload_pretty": _pretty_payload(event.payload),
            "time": event.created_at[:19].replace("T", " "),
            "retrieval_id": recall_retrieval_id(event),
            "summary": event_summary(event),
        }
        for event in page.items
    ]
    status = latest_status(principal, scope)
    context = {
        "form": form,
        "form_ok": form_ok,
        "events": events,
        "page": page,
        "next_url": page.next_url(request),
        "first_url": _first_page_url(request),
        "scope": scope,
        "status": status,
        "status_auditable": bool(
            status and status.run and access.may(principal, access.AUDIT, _run_scope(status.run))
        ),
        "targets": verify_targets(principal, scope),
        "can_export": _may_export(principal, scope),
        "export_url": _export_url(request),
    }
    return render_page(request, "audit/explorer.html", context, partial="events")


def _selector_filters(filters: dict[str, Any]) -> dict[str, Any]:
    """The explorer form's filters in ``audit.selectors.list_events``'s words."""
    renamed = {"scope": "within", "since": "created_from", "until": "created_before"}
    return {renamed.get(name, name): value for name, value in filters.items()}


def _event_page(
    principal: Principal, filters: dict[str, Any], *, before: int | None
) -> KeyPage[AuditEvent]:
    page = selectors.list_events(
        principal, before=before, limit=EVENTS_PER_PAGE, **_selector_filters(filters)
    )
    return KeyPage(items=page.events, next_key=page.next_before, first_page=before is None)


def _first_page_url(request: HttpRequest) -> str:
    params = request.GET.copy()
    params.pop("before", None)
    return f"{request.path}?{params.urlencode()}" if params else request.path


def _export_url(request: HttpRequest) -> str:
    params = request.GET.copy()
    params.pop("before", None)
    query = params.urlencode()
    return reverse("audit:export") + (f"?{query}" if query else "")


def _may_export(principal: Principal, scope: Scope | None) -> bool:
    if scope is not None:
        return access.may(principal, access.AUDIT, scope)
    return access.has_capability_anywhere(principal, access.AUDIT)


@require_GET
@dashboard_view
def event_detail(request: HttpRequest, event_id: str) -> HttpResponse:
    """One event with every column, its payload, whether its hash recomputes and links back."""
    principal = principal_for(request)
    try:
        event = selectors.get_event(principal, event_id)
    except AuditEvent.DoesNotExist as exc:
        raise Http404("no such event") from exc
    try:
        recomputed: str | None = row_event_hash(event)
    except ValueError:
        recomputed = None
    previous = selectors.list_events(
        principal, subject=event.subject_id, before=event.sequence, limit=1
    ).events
    context = {
        "event": event,
        "payload_pretty": _pretty_payload(event.payload),
        "retrieval_id": recall_retrieval_id(event),
        "summary": event_summary(event),
        "recomputed": recomputed,
        "hash_ok": recomputed == event.event_hash,
        "previous": previous[0] if previous else None,
    }
    return render_page(request, "audit/event.html", context)


@require_GET
@dashboard_view
def export(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """The current filter as JSON Lines, streamed in sequence order (AUDIT capability)."""
    principal = principal_for(request)
    _require_anywhere(principal, access.AUDIT)
    form = EventFilterForm(request.GET or None)
    filters: dict[str, Any] = {}
    if form.is_bound:
        if not form.is_valid():
            if "scope" in form.errors:
                return invalid_scope_response(request, ScopeError(form.errors["scope"][0]))
            raise BadRequest("; ".join(str(e) for errors in form.errors.values() for e in errors))
        filters = form.filters()
    if filters.get("scope"):
        access.require(principal, access.AUDIT, filters["scope"])
    lines = export_filtered(principal, filters)
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    return _jsonl_response(lines, f"audit-export-{stamp}.jsonl")


def export_filtered(principal: Principal, filters: dict[str, Any]) -> Iterator[str]:
    """The explorer's filter as JSON Lines, newest first like the page, AUDIT-able chains only.

    Each line is the canonical JSON of the row's ``audit_log`` columns (payload
    as its stored text), the shape ``audit.selectors.export_lines`` writes.
    Rows come through the key-paginated event selector, a page at a time, so
    memory stays constant however long the export runs.
    """
    auditable: dict[str, bool] = {}
    before: int | None = None
    while True:
        page = selectors.list_events(
            principal, before=before, limit=selectors.MAX_PAGE_SIZE, **_selector_filters(filters)
        )
        for event in page.events:
            subject = event.subject_id
            if subject not in auditable:
                auditable[subject] = readable(principal, subject, access.AUDIT)
            if auditable[subject]:
                yield canonical_json({name: getattr(event, name) for name in COLUMNS}) + "\n"
        if page.next_before is None:
            return
        before = page.next_before


# -- export files ----------------------------------------------------------------------

RECENT_EXPORTS = 20


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def exports(request: HttpRequest) -> HttpResponse:
    """The Exports page: ask for an export file (POST queues a job) and see your recent ones.

    The direct "Export JSONL" link of the explorer streams small selections;
    this queues the work for a task worker and offers the file, with its
    SHA-256, once it is written.
    """
    principal = principal_for(request)
    _require_anywhere(principal, access.AUDIT)
    if request.method == "POST":
        form = ExportRequestForm(request.POST)
        if form.is_valid():
            wanted = form.request()
            target = Scope.parse(wanted["scope"]) if wanted["scope"] else Scope.platform()
            if not access.may(principal, access.AUDIT, target):
                # A form error, not a 404: the page is the person's own, and the
                # message reveals nothing they did not type.
                form.add_error(
                    "scope",
                    "You do not audit this scope; choose one of yours: "
                    + (", ".join(str(s) for s in access.granted_scopes(principal, access.AUDIT))),
                )
            else:
                try:
                    job = start_export(principal=principal, **wanted)
                except ExportError as exc:
                    form.add_error(exc.field if exc.field in form.fields else None, str(exc))
                else:
                    return redirect("jobs:detail", job_id=job.pk)
        status = 400
    else:
        initial = {name: request.GET[name] for name in ("scope",) if request.GET.get(name)}
        form = ExportRequestForm(initial=initial)
        status = 200
    context = {
        "form": form,
        "jobs": job_selectors.recent_jobs(principal, kind=Job.Kind.EXPORT, limit=RECENT_EXPORTS),
        "export_days": settings.AETNAWEB_RETENTION_EXPORT_DAYS,
    }
    return render_page(request, "audit/exports.html", context, status=status)


# -- verification runs -----------------------------------------------------------------


@require_POST
@dashboard_view
def verify_start(request: HttpRequest) -> HttpResponse:
    """Start a background verification of one scope's chains (AUDIT capability there)."""
    principal = principal_for(request)
    form = VerifyChainForm(request.POST)
    if not form.is_valid():
        _require_anywhere(principal, access.AUDIT)
        errors = form.errors.get("scope") or ["Choose a scope to verify."]
        messages.error(request, " ".join(str(error) for error in errors))
        return redirect("audit:explorer")
    scope = Scope.parse(form.cleaned_data["scope"])
    access.require(principal, access.AUDIT, scope)
    try:
        run = start_verification_run(
            subject=None if scope.is_platform else scope,
            principal=principal,
        )
    except AuditError as exc:
        _require_anywhere(principal, access.AUDIT)
        messages.error(request, str(exc))
        return redirect("audit:explorer")
    if getattr(request, "htmx", False):
        return render_page(
            request, "audit/run.html", _run_context(principal, run), partial="progress"
        )
    return redirect("audit:run", run_id=run.pk)


def _run_context(principal: Principal, run: VerificationRun) -> dict[str, Any]:
    status = None if run.is_running else status_from_run(run, principal)
    failures = []
    hidden = 0
    for failure in run.failures or []:
        if isinstance(failure, dict) and isinstance(failure.get("subject_id"), str):
            if readable(principal, failure["subject_id"]):
                failures.append(failure)
            else:
                hidden += 1
    return {
        "run": run,
        "status": status,
        "failures": failures,
        "hidden_failures": hidden,
        "errors": [
            f["error"] for f in (run.failures or []) if isinstance(f, dict) and "error" in f
        ],
        "scope_label": run.scope or "every chain",
        "status_dom_id": chain_status_dom_id(run.scope or str(Scope.platform())),
    }


@never_cache
@require_GET
@dashboard_view
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    """A run's progress (polled by htmx every second while it runs) and its verdict."""
    principal = principal_for(request)
    run = _visible_run(principal, run_id)
    return render_page(request, "audit/run.html", _run_context(principal, run), partial="progress")


# -- checkpoints -----------------------------------------------------------------------


def _visible_checkpoints(principal: Principal, *, before: int | None) -> KeyPage[Checkpoint]:
    """Newest first, only those the principal may see, examining a bounded number of rows."""
    # The document is read too: the page checks it still is what was issued.
    queryset = Checkpoint.objects.order_by("-id")
    if before is not None:
        queryset = queryset.filter(id__lt=before)
    shown: list[Checkpoint] = []
    last_examined: int | None = None
    more = False
    for checkpoint in queryset[:CHECKPOINT_SCAN_LIMIT].iterator(chunk_size=100):
        if len(shown) == CHECKPOINTS_PER_PAGE:
            more = True
            break
        last_examined = checkpoint.pk
        if may_see_checkpoint(principal, checkpoint):
            shown.append(checkpoint)
    else:
        # The scan limit was reached: there may be more beyond it.
        more = last_examined is not None and queryset.filter(id__lt=last_examined).exists()
    return KeyPage(items=shown, next_key=last_examined if more else None, first_page=before is None)


def _with_consistency(checkpoints: Sequence[Checkpoint]) -> list[dict[str, Any]]:
    """Each row, and whether its log head extends the next older one on the page.

    ``extends`` is True (a consistency proof from this log verifies), False (a
    fork: flagged on the page), or None (no older head on the page, or a
    checkpoint from before the log). All proofs of a page cost two queries.
    """
    heads = [cp for cp in checkpoints if cp.tree_size is not None]
    pairs = {
        cp.pk: (older.tree_size, cp.tree_size)
        for cp, older in pairwise(heads)
        if older.tree_size and cp.tree_size is not None and older.tree_size <= cp.tree_size
    }
    try:
        proofs = tree.consistency_proofs(set(pairs.values()))
    except tree.TreeError as exc:
        proofs = dict.fromkeys(pairs.values(), str(exc))
    older_of = {cp.pk: older for cp, older in pairwise(heads)}
    altered = {cp.pk: stored_document_failures(cp) for cp in checkpoints}
    rows = []
    for cp in checkpoints:
        older = older_of.get(cp.pk)
        row: dict[str, Any] = {
            "checkpoint": cp,
            "extends": None,
            "why": "",
            "older": older,
            "altered": altered[cp.pk],
        }
        if older is not None and altered.get(older.pk) and not altered[cp.pk]:
            row["altered"] = ["the older checkpoint's stored document was edited"]
        if row["altered"]:
            # An edited stored document proves nothing either way: never "consistent".
            row["extends"], row["why"] = False, "; ".join(row["altered"])
        elif older is not None and cp.pk not in pairs:
            row["extends"] = older.tree_size == 0  # a shrunken log cannot extend the older one
            row["why"] = "" if row["extends"] else "the log is smaller than an older checkpoint"
        elif cp.pk in pairs:
            row["extends"], row["why"] = _extends(older, cp, proofs[pairs[cp.pk]])
        rows.append(row)
    return rows


def _extends(older: Any, newer: Checkpoint, proof: list[bytes] | str) -> tuple[bool, str]:
    if isinstance(proof, str):
        return False, proof
    try:
        merkle.verify_consistency(
            old_size=older.tree_size,
            new_size=newer.tree_size or 0,
            old_root=base64.b64decode(older.root_hash),
            new_root=base64.b64decode(newer.root_hash),
            proof=proof,
        )
    except (merkle.ProofError, ValueError) as exc:
        return False, str(exc)
    return True, ""


def _checkpoints_page(
    request: HttpRequest,
    principal: Principal,
    *,
    upload_form: EvidenceUploadForm | None = None,
    results: dict[str, Any] | None = None,
    status: int = 200,
) -> HttpResponse:
    page = _visible_checkpoints(principal, before=page_key(request))
    rows = _with_consistency(page.items)
    context = {
        "page": page,
        "rows": rows,
        "next_url": page.next_url(request),
        "upload_form": upload_form or EvidenceUploadForm(),
        "results": results,
        "verifier_key": selectors.published_verifier_key(),
    }
    partial = "results" if results is not None else "list"
    return render_page(request, "audit/checkpoints.html", context, partial=partial, status=status)


@require_GET
@dashboard_view
def checkpoints(request: HttpRequest) -> HttpResponse:
    """List checkpoints (those pinning only chains the principal may audit) and the upload form."""
    principal = principal_for(request)
    _require_anywhere(principal, access.AUDIT)
    return _checkpoints_page(request, principal)


@require_POST
@dashboard_view
def checkpoint_create(request: HttpRequest) -> HttpResponse:
    """Pin every chain the principal may audit; the result is downloadable at once."""
    principal = principal_for(request)
    _require_anywhere(principal, access.AUDIT)
    try:
        document = create_checkpoint(principal=principal)
    except CheckpointError as exc:
        messages.error(request, f"The checkpoint was not created: {exc}")
        return redirect("audit:checkpoints")
    checkpoint = Checkpoint.objects.get(checkpoint_sha256=document["checkpoint_sha256"])
    messages.success(
        request,
        f"Checkpoint created: it pins {checkpoint.subject_count} chain"
        f"{'s' if checkpoint.subject_count != 1 else ''} ({checkpoint.event_count} events). "
        "Download it and keep it somewhere this server cannot write.",
    )
    return redirect(f"{reverse('audit:checkpoints')}?{urlencode({'created': checkpoint.pk})}")


def _visible_checkpoint(principal: Principal, checkpoint_id: int) -> Checkpoint:
    try:
        return selectors.get_checkpoint(principal, checkpoint_id)
    except Checkpoint.DoesNotExist as exc:
        raise Http404("no such checkpoint") from exc


def _jsonl_response(lines: Iterator[str], filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@dashboard_view
def checkpoint_download(request: HttpRequest, checkpoint_id: int) -> StreamingHttpResponse:
    """One checkpoint as a one-line JSONL file, byte for byte as issued."""
    principal = principal_for(request)
    checkpoint = _visible_checkpoint(principal, checkpoint_id)
    stamp = checkpoint.created_at.strftime("%Y%m%dT%H%M%SZ")
    return _jsonl_response(
        iter([checkpoint.document + "\n"]),
        f"checkpoint-{stamp}-{checkpoint.checkpoint_sha256[:12]}.jsonl",
    )


def _checkpoint_id(request: HttpRequest, name: str, *, required: bool) -> int | None:
    raw = request.GET.get(name, "")
    if not raw and not required:
        return None
    if not (raw.isascii() and raw.isdigit()) or not 0 < int(raw) < 2**63:
        raise CheckpointError(f"{name} must be a checkpoint ID (a positive integer)", field=name)
    return int(raw)


@require_GET
@dashboard_view
def checkpoint_consistency(request: HttpRequest) -> HttpResponse:
    """The consistency bundle between checkpoints ``old`` and ``new``, as a JSON download.

    The same bundle as the API's, checked offline by ``tools/verify_audit.py
    --consistency``. A fork is downloadable too: it is the evidence.
    """
    principal = principal_for(request)
    _require_anywhere(principal, access.AUDIT)
    try:
        old_id = _checkpoint_id(request, "old", required=True)
        new_id = _checkpoint_id(request, "new", required=False)
        assert old_id is not None  # required=True
        bundle = selectors.consistency_bundle(principal, old_id=old_id, new_id=new_id)
    except Checkpoint.DoesNotExist as exc:
        raise Http404("no such checkpoint") from exc
    except CheckpointError as exc:
        # Plain text (never rendered as HTML): the reason, for the person who clicked.
        return HttpResponse(
            f"{exc.field or 'checkpoint'}: {exc}\n",
            status=400 if exc.field else 503,
            content_type="text/plain; charset=utf-8",
        )
    old_head, new_head = bundle["old_head"], bundle["new_head"]
    response = HttpResponse(canonical_json(bundle) + "\n", content_type="application/json")
    response["Content-Disposition"] = (
        f'attachment; filename="consistency-{old_head["checkpoint_id"]}'
        f'-{new_head["checkpoint_id"]}.json"'
    )
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@dashboard_view
def checkpoint_download_all(request: HttpRequest) -> StreamingHttpResponse:
    """Every checkpoint the principal may see, oldest first, one per line (streamed)."""
    principal = principal_for(request)
    _require_anywhere(principal, access.AUDIT)

    def lines() -> Iterator[str]:
        for checkpoint in Checkpoint.objects.order_by("id").iterator(chunk_size=50):
            if may_see_checkpoint(principal, checkpoint):
                yield checkpoint.document + "\n"

    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    return _jsonl_response(lines(), f"checkpoints-{stamp}.jsonl")


@require_POST
@dashboard_view
def evidence_verify(request: HttpRequest) -> HttpResponse:
    """Upload a checkpoint file or a deletion receipt and show the verdict for each part."""
    principal = principal_for(request)
    _require_anywhere(principal, access.AUDIT)
    form = EvidenceUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _checkpoints_page(request, principal, upload_form=form, status=400)
    upload: EvidenceUpload = form.cleaned_data["evidence"]
    try:
        if upload.kind == "checkpoint":
            results = _checkpoint_results(principal, upload)
        else:
            results = _receipt_results(principal, upload)
    except CheckpointError as exc:
        form.add_error("evidence", str(exc))
        return _checkpoints_page(request, principal, upload_form=form, status=400)
    except (AccessDenied, ScopeError):
        form.add_error(
            "evidence",
            "This file names chains outside the scopes you may audit; ask an auditor of those "
            "scopes to verify it.",
        )
        return _checkpoints_page(request, principal, upload_form=form, status=400)
    return _checkpoints_page(request, principal, upload_form=EvidenceUploadForm(), results=results)


def _checkpoint_results(principal: Principal, upload: EvidenceUpload) -> dict[str, Any]:
    documents = dict(read_checkpoint_lines(upload.checkpoint_lines))
    verdicts = verify_checkpoints(upload.checkpoint_lines, principal=principal)
    lines = []
    for verdict in verdicts:
        document = documents[verdict.line_number]
        altered = any("checkpoint_sha256" in failure for failure in verdict.failures)
        by_subject: dict[str, list[str]] = {}
        for failure in verdict.failures:
            for subject in document["subjects"]:
                if failure.startswith(f"subject {subject}:"):
                    by_subject.setdefault(subject, []).append(
                        failure.removeprefix(f"subject {subject}:").strip()
                    )
        subjects = [
            {
                "subject_id": subject,
                "sequence": entry.get("sequence"),
                "event_count": entry.get("event_count"),
                "ok": not altered and subject not in by_subject,
                "reasons": by_subject.get(subject, []),
            }
            for subject, entry in sorted(document["subjects"].items())
        ]
        lines.append(
            {
                "verdict": verdict,
                "altered": altered,
                "failed_subjects": [s for s in subjects if not s["ok"]],
                "held_subjects": [s for s in subjects if s["ok"]],
                # The Merkle log head's own failures (signature, fork, truncation)
                "log_failures": [
                    f for f in verdict.failures if not f.startswith(("subject ", "checkpoint_"))
                ],
            }
        )
    return {
        "kind": "checkpoint",
        "filename": upload.filename,
        "ok": all(v.ok for v in verdicts),
        "lines": lines,
    }


def _receipt_results(principal: Principal, upload: EvidenceUpload) -> dict[str, Any]:
    receipt = upload.receipt
    subject = receipt.get("subject_id") if isinstance(receipt, dict) else None
    if isinstance(subject, str):
        access.require(principal, access.AUDIT, subject)
    failures = verify_deletion_receipt(receipt, principal=principal)
    return {
        "kind": "receipt",
        "filename": upload.filename,
        "ok": not failures,
        "failures": failures,
        "receipt": receipt,
    }
