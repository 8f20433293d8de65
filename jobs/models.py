"""Background jobs: one row per request for long work, carrying the progress the dashboard polls.

The apps own the work (``audit`` exports, ``memory`` reindexes, the project's
retention run); this app owns only the bookkeeping they share, so it imports
none of them. :class:`JobStatus` is the status vocabulary and the
running/queued/stale rules, shared with ``audit.VerificationRun`` (which
keeps its own columns because the verdict has its own shape).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class JobStatus:
    """Queued / running / stale rules for a row with ``status``, ``started_at`` and ``heartbeat_at``.

    A row is written ``running`` with ``heartbeat_at == started_at`` when it
    is recorded; the worker's first act is a heartbeat, so until then it is
    *queued*. A running row whose heartbeat stopped for
    ``STALE_AFTER_SECONDS`` belongs to a process that is gone (*stale*).
    Subclasses name their progress columns in ``PROGRESS_FIELDS``.
    """

    RUNNING = "running"
    STALE_AFTER_SECONDS = 300
    PROGRESS_FIELDS: tuple[str, str] = ("done", "total")

    status: str
    started_at: object
    heartbeat_at: object

    @property
    def is_running(self) -> bool:
        return self.status == self.RUNNING

    @property
    def is_stale(self) -> bool:
        """Still marked running but silent for minutes: the process that ran it is gone."""
        if not self.is_running:
            return False
        silent = timezone.now() - self.heartbeat_at  # type: ignore[operator]
        return silent.total_seconds() > self.STALE_AFTER_SECONDS

    @property
    def is_queued(self) -> bool:
        """Recorded but not yet picked up by a task worker (its first act is a heartbeat)."""
        return self.is_running and self.heartbeat_at == self.started_at

    @property
    def progress_percent(self) -> int:
        if not self.is_running:
            return 100
        done_field, total_field = self.PROGRESS_FIELDS
        done, total = getattr(self, done_field), getattr(self, total_field)
        if not total:
            return 0
        return min(99, int(100 * done / total))


class Job(JobStatus, models.Model):
    """One export, reindex, retention run, subject erasure or subject export: who asked, over what, how far it got, what it left."""

    class Kind(models.TextChoices):
        EXPORT = "export", "Audit export"
        REINDEX = "reindex", "Semantic reindex"
        RETENTION = "retention", "Retention run"
        ERASURE = "erasure", "Subject erasure"
        SUBJECT_EXPORT = "subject_export", "Subject export"

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        ERROR = "error", "Error (did not finish)"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    # The canonical scope the job covers; null for every scope (the platform).
    scope = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_by = models.CharField(max_length=150)
    # The signed-in person who asked (null for a shell command): exports are
    # theirs alone to download.
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    done = models.PositiveBigIntegerField(default=0)
    total = models.PositiveBigIntegerField(default=0)
    # What was asked (an export's range, a retention run's dry-run flag).
    params = models.JSONField(default=dict, blank=True)
    # What it did (counts), shown on the page; never secrets or content.
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    # A file the job wrote (exports): its name inside the exports directory.
    file_name = models.CharField(max_length=200, blank=True, default="")
    file_sha256 = models.CharField(max_length=64, blank=True, default="")
    file_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    file_removed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["kind", "status", "finished_at"], name="jobs_kind_status"),
            models.Index(fields=["requested_by", "kind"], name="jobs_requester"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} job #{self.pk} over {self.scope or 'every scope'}: {self.status}"

    @property
    def scope_label(self) -> str:
        return self.scope or "every scope"

    @property
    def has_file(self) -> bool:
        return bool(
            self.status == self.Status.DONE and self.file_name and self.file_removed_at is None
        )

    @property
    def may_retry(self) -> bool:
        """A failed job, or one whose worker vanished, can be asked for again."""
        return self.status == self.Status.ERROR or self.is_stale
