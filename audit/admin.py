"""Read-only admin for raw inspection of the evidence layer.

Nothing here can add, change or delete a row: audit rows are append-only
(audit-log-v1), and the bookkeeping tables are kept by the services in the
same transactions as the events they describe. An admin with view permission
can look; writes go through ``manage.py audit`` and the dashboard.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from audit.models import (
    AuditDailyCount,
    AuditEvent,
    AuditSubject,
    AuditTypeCount,
    Checkpoint,
    VerificationRun,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """View permission only; every field shown read-only (bulk delete disappears with it)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [field.name for field in self.model._meta.fields]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("sequence", "subject_id", "event_type", "actor", "created_at", "record_id")
    # No list_filter: its choices would be a DISTINCT over the whole table.
    search_fields = ("=event_id", "=subject_id", "=record_id", "=session_id")
    ordering = ("-sequence",)
    show_full_result_count = False  # no COUNT(*) over audit_log on a page load


@admin.register(AuditSubject)
class AuditSubjectAdmin(ReadOnlyAdmin):
    list_display = ("subject_id", "event_count", "head_sequence", "last_event_at")
    search_fields = ("=subject_id", "=tenant")


@admin.register(AuditDailyCount)
class AuditDailyCountAdmin(ReadOnlyAdmin):
    list_display = ("subject_id", "day", "event_count")
    date_hierarchy = "day"


@admin.register(AuditTypeCount)
class AuditTypeCountAdmin(ReadOnlyAdmin):
    list_display = ("subject_id", "event_type", "event_count")


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "created_by", "subject_count", "event_count", "checkpoint_sha256")


@admin.register(VerificationRun)
class VerificationRunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "scope",
        "status",
        "started_by",
        "started_at",
        "finished_at",
        "events_checked",
        "first_bad_sequence",
    )
    list_filter = ("status",)
