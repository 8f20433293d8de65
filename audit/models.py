"""The ``audit_log`` table, exactly as audit-log-v1 names it.

Rows are append-only: the engine inserts through :func:`audit.services.append_event`
and never updates or deletes one. The admin shows them read-only.
"""

from __future__ import annotations

from django.db import models


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
        ]

    def __str__(self) -> str:
        return f"#{self.sequence} {self.subject_id} {self.event_type}"
