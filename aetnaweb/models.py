"""Who may do what where: operator scope grants and agent API tokens.

The rules that read these rows live in :mod:`aetnaweb.access`; nothing else
decides permissions.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    REVIEWER = "reviewer", "Reviewer"
    APPROVER = "approver", "Approver"
    AUDITOR = "auditor", "Auditor"
    ADMIN = "admin", "Admin"


class ScopeGrant(models.Model):
    """A user may act with ``role`` on ``scope`` and its descendants (scopes.md "Operators")."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scope_grants"
    )
    scope = models.CharField(max_length=200, help_text="Canonical tenant:user:project scope")
    scope_tenant = models.CharField(max_length=64)
    scope_user = models.CharField(max_length=64)
    scope_project = models.CharField(max_length=64)
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "scope", "role"], name="grant_unique_user_scope_role"
            ),
        ]
        indexes = [models.Index(fields=["user", "role"], name="grant_user_role")]
        ordering = ["user_id", "scope", "role"]

    def __str__(self) -> str:
        return f"{self.user} {self.role} on {self.scope}"


class ApiToken(models.Model):
    """An agent credential bound to one scope subtree and a set of capabilities.

    Only a SHA-256 of the secret is stored; the secret is shown once at creation.
    """

    name = models.CharField(max_length=100)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="api_tokens",
        null=True,
        blank=True,
        help_text="The account responsible for the agent; it may not approve the agent's plans.",
    )
    scope = models.CharField(max_length=200)
    scope_tenant = models.CharField(max_length=64)
    scope_user = models.CharField(max_length=64)
    scope_project = models.CharField(max_length=64)
    capabilities = models.JSONField(default=list)
    token_prefix = models.CharField(max_length=16, unique=True)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.token_prefix}…) on {self.scope}"
