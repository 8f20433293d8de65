"""Read-only admin views for raw inspection (changes go through the dashboard's services)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from webhooks.models import WebhookDelivery, WebhookEndpoint


class ReadOnly(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnly):
    list_display = ("id", "scope", "active", "created_by", "created_at")
    exclude = ("secret_salt",)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnly):
    list_display = ("id", "endpoint", "event_type", "status", "attempts", "last_status_code")
    list_filter = ("status", "event_type")
