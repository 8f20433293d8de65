"""Read-only admin for raw inspection of memory rows (writes go through memory.services)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from memory.models import DeletionReceipt, Episode, Record, RetrievalEvent, ScopeStats


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Record)
class RecordAdmin(ReadOnlyAdmin):
    list_display = ("record_id", "scope", "status", "trust_tier", "fact_key", "created_at")
    list_filter = ("status", "trust_tier", "source_type")
    search_fields = ("record_id", "scope")


@admin.register(Episode)
class EpisodeAdmin(ReadOnlyAdmin):
    list_display = ("episode_id", "scope", "session_id", "source_type", "created_at", "purged_at")
    search_fields = ("episode_id", "scope", "session_id")


@admin.register(RetrievalEvent)
class RetrievalEventAdmin(ReadOnlyAdmin):
    list_display = ("retrieval_id", "scope", "actor", "purpose", "created_at")
    search_fields = ("retrieval_id", "scope")


@admin.register(DeletionReceipt)
class DeletionReceiptAdmin(ReadOnlyAdmin):
    list_display = ("audit_event_id", "scope", "event_type", "record_count", "created_at")


@admin.register(ScopeStats)
class ScopeStatsAdmin(ReadOnlyAdmin):
    list_display = ("scope", "active", "quarantined", "superseded", "tombstoned", "episodes")
    search_fields = ("scope",)
