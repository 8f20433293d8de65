"""Webhook endpoints (where to send) and deliveries (each attempt's state).

An endpoint's signing secret is never stored: only ``secret_salt``, from which
the secret is derived with the server key (webhooks/signing.py).
"""

from __future__ import annotations

from django.db import models


class WebhookEndpoint(models.Model):
    """An HTTPS URL that receives chosen events for one scope subtree."""

    id = models.CharField(primary_key=True, max_length=32)  # whe_<hex>
    url = models.CharField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    scope = models.CharField(max_length=200)
    scope_tenant = models.CharField(max_length=64)
    scope_user = models.CharField(max_length=64)
    scope_project = models.CharField(max_length=64)
    events = models.JSONField(default=list)
    active = models.BooleanField(default=True)
    secret_salt = models.CharField(max_length=64)
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "id"]
        indexes = [models.Index(fields=["scope", "active"], name="webhook_endpoint_scope")]

    def __str__(self) -> str:
        return f"{self.id} on {self.scope}"


class WebhookDelivery(models.Model):
    """One event for one endpoint: its fixed body and where its attempts stand."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    id = models.CharField(primary_key=True, max_length=32)  # whd_<hex>, the Webhook-Id header
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event_type = models.CharField(max_length=100)
    subject = models.CharField(max_length=200)
    body = (
        models.TextField()
    )  # the exact JSON sent on every attempt (signed with a fresh timestamp)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True)
    response_excerpt = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "webhook deliveries"  # Django's default: "webhook deliverys"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["endpoint", "-created_at"], name="webhook_delivery_endpoint"),
            models.Index(fields=["status", "next_attempt_at"], name="webhook_delivery_due"),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.event_type}) {self.status}"
