"""Read-only admin for raw inspection of guarded actions.

Every write goes through :mod:`actions.services` (so it is checked and
audited); the admin only looks. Payload content (file content, before-images)
is not shown here at all: the dashboard shows a reviewer the diff of a plan
they may see, and the admin shows digests.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from actions.models import (
    ActionApproval,
    ActionAttempt,
    ActionEvidence,
    ActionOperation,
    ActionPayload,
    ActionReceipt,
    ActionTransaction,
)
from audit.admin import ReadOnlyAdmin


@admin.register(ActionTransaction)
class ActionTransactionAdmin(ReadOnlyAdmin):
    list_display = ("id", "subject_id", "state", "mode", "actor_id", "created_at", "terminal_at")
    list_filter = ("state", "mode")
    search_fields = ("=id", "=subject_id", "=actor_id", "=session_id")
    ordering = ("-created_at",)


@admin.register(ActionOperation)
class ActionOperationAdmin(ReadOnlyAdmin):
    list_display = ("id", "transaction_id", "ordinal", "adapter", "operation", "state")
    search_fields = ("=id", "=transaction__id")


@admin.register(ActionEvidence)
class ActionEvidenceAdmin(ReadOnlyAdmin):
    list_display = ("id", "operation_id", "relation", "evidence_kind", "trust_tier", "attested")
    search_fields = ("=operation__id",)


@admin.register(ActionApproval)
class ActionApprovalAdmin(ReadOnlyAdmin):
    list_display = ("id", "transaction_id", "approver_principal", "issued_at", "expires_at")
    search_fields = ("=transaction__id", "=approver_principal")


@admin.register(ActionAttempt)
class ActionAttemptAdmin(ReadOnlyAdmin):
    list_display = ("id", "phase", "attempt_number", "state", "error_code", "started_at")
    search_fields = ("=transaction__id",)


@admin.register(ActionPayload)
class ActionPayloadAdmin(ReadOnlyAdmin):
    list_display = ("operation_id", "kind", "payload_digest", "purged_at")
    search_fields = ("=transaction__id",)
    exclude = ("payload",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [name for name in super().get_readonly_fields(request, obj) if name != "payload"]


@admin.register(ActionReceipt)
class ActionReceiptAdmin(ReadOnlyAdmin):
    list_display = ("id", "transaction_id", "terminal_state", "created_at")
    search_fields = ("=transaction__id",)
