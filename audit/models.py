"""The ``audit_log`` table, exactly as audit-log-v1 names it, and the evidence layer's bookkeeping.

Rows are append-only: the engine inserts through :func:`audit.services.append_event`
and never updates or deletes one. The admin shows every model here read-only.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Upper

from jobs.models import JobStatus


class AuditEvent(models.Model):
    sequence = models.BigAutoField(primary_key=True, db_column="sequence")
    event_id = models.CharField(max_length=36, unique=True)
    subject_id = models.CharField(max_length=200)
    event_type = models.CharField(max_length=100)
    created_at = models.CharField(max_length=40)
    actor = models.CharField(max_length=150)
    session_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001  (nullable per audit-log-v1)
    turn_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001  (nullable per audit-log-v1)
    record_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001  (nullable per audit-log-v1)
    payload = models.TextField()
    prev_hash = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001  (nullable per audit-log-v1)
    event_hash = models.CharField(max_length=64)

    class Meta:
        db_table = "audit_log"
        ordering = ["sequence"]
        indexes = [
            models.Index(fields=["subject_id", "sequence"], name="audit_subject_seq"),
            models.Index(fields=["record_id", "sequence"], name="audit_record_seq"),
            models.Index(fields=["event_type", "sequence"], name="audit_type_seq"),
            models.Index(fields=["actor", "sequence"], name="audit_actor_seq"),
            models.Index(fields=["session_id", "sequence"], name="audit_session_seq"),
            # The explorer matches actors case-insensitively (UPPER(actor) = UPPER(%s)).
            models.Index(Upper("actor"), models.F("sequence"), name="audit_actor_upper_seq"),
        ]

    def __str__(self) -> str:
        return f"#{self.sequence} {self.subject_id} {self.event_type}"


class AuditSubject(models.Model):
    """One row per chain: a derived index kept by ``append_event`` in the same transaction.

    It makes listing visible subjects, checkpoints and the overview O(subjects)
    instead of O(events). It is never trusted as evidence: verification reads
    ``audit_log`` itself, and checkpoints confirm each head against it.
    """

    subject_id = models.CharField(max_length=200, unique=True)
    tenant = models.CharField(max_length=64)
    user = models.CharField(max_length=64)
    project = models.CharField(max_length=64)
    event_count = models.PositiveBigIntegerField(default=0)
    head_sequence = models.BigIntegerField()
    head_hash = models.CharField(max_length=64)
    last_event_at = models.CharField(max_length=40)

    class Meta:
        db_table = "audit_subject"  # named: append_event writes it with raw SQL
        ordering = ["subject_id"]
        indexes = [models.Index(fields=["tenant", "user", "project"], name="audit_subject_tree")]

    def __str__(self) -> str:
        return f"{self.subject_id} ({self.event_count} events)"


class AuditDailyCount(models.Model):
    """Events per subject per UTC day, for the overview chart without scanning ``audit_log``."""

    subject_id = models.CharField(max_length=200)
    day = models.DateField()
    event_count = models.PositiveBigIntegerField(default=0)

    class Meta:
        db_table = "audit_daily_count"  # named: append_event writes it with raw SQL
        ordering = ["subject_id", "day"]
        constraints = [
            models.UniqueConstraint(fields=["subject_id", "day"], name="audit_daily_subject_day")
        ]
        # The overview chart sums a 30-day window of every visible chain: with
        # the count in the index that is an index-only range scan.
        indexes = [
            models.Index(fields=["day", "subject_id", "event_count"], name="audit_daily_day_cover")
        ]

    def __str__(self) -> str:
        return f"{self.subject_id} {self.day}: {self.event_count}"


class AuditTypeCount(models.Model):
    """Events per subject per event type: the explorer's type picker counts without
    scanning ``audit_log`` (kept by ``append_event`` in the same transaction)."""

    subject_id = models.CharField(max_length=200)
    event_type = models.CharField(max_length=100)
    event_count = models.PositiveBigIntegerField(default=0)

    class Meta:
        db_table = "audit_type_count"  # named: append_event writes it with raw SQL
        ordering = ["subject_id", "event_type"]
        constraints = [
            models.UniqueConstraint(
                fields=["subject_id", "event_type"], name="audit_type_count_subject_type"
            )
        ]

    def __str__(self) -> str:
        return f"{self.subject_id} {self.event_type}: {self.event_count}"


class Checkpoint(models.Model):
    """An ``aetnamem-checkpoint-v1`` document as issued: the canonical line, byte for byte."""

    created_at = models.DateTimeField()
    created_by = models.CharField(max_length=150)
    document = models.TextField()
    checkpoint_sha256 = models.CharField(max_length=64, unique=True)
    subject_count = models.PositiveIntegerField()
    event_count = models.PositiveBigIntegerField()
    sink = models.CharField(max_length=500, blank=True, default="")
    # The Merkle log head the document carries (null: issued before the log existed),
    # kept in columns so the checkpoints page can check consistency without parsing.
    tree_size = models.PositiveBigIntegerField(null=True, blank=True)
    root_hash = models.CharField(max_length=44, blank=True, default="")
    note_signed = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"checkpoint {self.checkpoint_sha256[:12]} ({self.subject_count} subjects)"


class VerificationRun(JobStatus, models.Model):
    """One verification of a scope's chains (or of every chain), with its progress.

    The dashboard polls this row while the run is ``running``; a run whose
    heartbeat stopped (the process died) reads as interrupted, see
    :attr:`is_stale`.
    """

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        PASSED = "passed", "Passed"
        FAILED = "failed", "Failed"
        ERROR = "error", "Error (did not finish)"

    # Queued / running / stale read the same way as every background job.
    PROGRESS_FIELDS = ("events_checked", "total_events")

    scope = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001  (null = every chain)
    tenant = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001  (null for all/platform)
    scope_depth = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_by = models.CharField(max_length=150)
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    subjects_checked = models.PositiveIntegerField(default=0)
    events_checked = models.PositiveBigIntegerField(default=0)
    total_events = models.PositiveBigIntegerField(default=0)
    first_bad_sequence = models.BigIntegerField(null=True, blank=True)
    failures = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["tenant", "scope_depth", "status"], name="audit_run_tenant"),
        ]

    def __str__(self) -> str:
        return f"verification #{self.pk} of {self.scope or 'every chain'}: {self.status}"


class AuditTreeLeaf(models.Model):
    """Leaf ``leaf_index`` of the global Merkle log: the event at ``sequence`` (issue 14).

    ``leaf_hash`` is SHA-256(0x00 || "aetnaweb-audit-leaf-v1:" || event_hash),
    see :mod:`audit.merkle`. Written by ``append_event`` in the event's own
    transaction, in the order appends commit.
    """

    leaf_index = models.BigIntegerField(primary_key=True)
    sequence = models.BigIntegerField(unique=True)
    leaf_hash = models.CharField(max_length=64)

    class Meta:
        db_table = "audit_tree_leaf"  # named: append_event writes it with raw SQL
        ordering = ["leaf_index"]

    def __str__(self) -> str:
        return f"leaf {self.leaf_index} = event #{self.sequence}"


class AuditTreeNode(models.Model):
    """A complete subtree of ``2**level`` leaves (level >= 1), stored once it is complete.

    ``node_id`` packs the address: ``position << 6 | level``, so a proof's
    nodes are one primary-key ``IN`` lookup.
    """

    node_id = models.BigIntegerField(primary_key=True)
    hash = models.CharField(max_length=64)

    class Meta:
        db_table = "audit_tree_node"  # named: append_event writes it with raw SQL

    def __str__(self) -> str:
        return f"node {self.node_id & 63}/{self.node_id >> 6}"


class AuditTreeState(models.Model):
    """The single row holding the tree size and its frontier (the hashes the next append needs)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    size = models.BigIntegerField(default=0)
    # The hex hashes of merkle.frontier_nodes(size), concatenated (64 characters each).
    frontier = models.TextField(default="", blank=True)

    class Meta:
        db_table = "audit_tree_state"  # named: append_event writes it with raw SQL

    def __str__(self) -> str:
        return f"Merkle log of {self.size} leaves"
