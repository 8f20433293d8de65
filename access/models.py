"""Who may do what where: operator scope grants, agent API tokens and their usage, sign-in throttles.

The rules that read these rows live in :mod:`aetnaweb.access` (the kernel);
nothing here decides permissions. ``Role`` is defined there too, since the
roles are part of the rules; it is re-exported here for the model's choices.

These models lived in the project package until issue 11 moved them into this
app: each keeps its table name (``db_table``) so existing databases migrate
without touching a row (see ``migrations/0001_initial.py``).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from aetnaweb.access import Role

__all__ = [
    "ApiToken",
    "IdempotencyKey",
    "Invitation",
    "LoginThrottle",
    "RateLimitWindow",
    "Role",
    "ScopeGrant",
]


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
        db_table = "aetnaweb_scopegrant"  # its name from before the move: no table is renamed
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
    rate_limit_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text=(
            "API requests this token may make per minute; empty: the server default "
            "(AETNAWEB_API_RATE_LIMIT_PER_MINUTE); 0: unlimited."
        ),
    )

    class Meta:
        db_table = "aetnaweb_apitoken"  # its name from before the move: no table is renamed
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.token_prefix}…) on {self.scope}"


class LoginThrottle(models.Model):
    """Recent failed sign-ins for one account name or one client address (see access.lockouts).

    ``retry_at`` is when the next attempt is accepted: a short, growing wait
    once ``failures`` passes the slow-down threshold, the full lockout period
    once it reaches the lock threshold (``locked_at`` set).
    """

    class Kind(models.TextChoices):
        ACCOUNT = "account", "Account"
        ADDRESS = "address", "Address"

    kind = models.CharField(max_length=8, choices=Kind.choices)
    # The normalized account name (NFKC, casefolded) or the client IP address.
    key = models.CharField(max_length=150)
    # Shown to admins: the account name only when such an account exists
    # (otherwise what was typed may be a password typed in the wrong box).
    label = models.CharField(max_length=150)
    failures = models.PositiveIntegerField(default=0)
    first_failure_at = models.DateTimeField()
    last_failure_at = models.DateTimeField()
    retry_at = models.DateTimeField(null=True, blank=True)
    locked_at = models.DateTimeField(null=True, blank=True)
    slowed_audited = models.BooleanField(default=False)

    class Meta:
        db_table = "aetnaweb_loginthrottle"  # its name from before the move: no table is renamed
        constraints = [
            models.UniqueConstraint(fields=["kind", "key"], name="login_throttle_unique_kind_key"),
        ]
        indexes = [models.Index(fields=["last_failure_at"], name="login_throttle_last_failure")]
        ordering = ["-last_failure_at"]

    def __str__(self) -> str:
        return f"{self.kind} {self.label}: {self.failures} failures"


class IdempotencyKey(models.Model):
    """The first answer to a write sent with an ``Idempotency-Key`` header (:mod:`access.idempotency`).

    The row is inserted before the write runs (``response_status`` null: in
    flight), so the unique constraint on (token, key) lets exactly one
    process execute it; the answer is filled in afterwards and replayed to
    retries until ``expires_at``.
    """

    token = models.ForeignKey(ApiToken, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    request_digest = models.CharField(max_length=64)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_content_type = models.CharField(max_length=100, blank=True, default="")
    response_body = models.BinaryField(null=True, blank=True)

    class Meta:
        db_table = "aetnaweb_idempotencykey"  # its name from before the move: no table is renamed
        constraints = [
            models.UniqueConstraint(fields=["token", "key"], name="idempotency_unique_token_key"),
        ]
        indexes = [models.Index(fields=["expires_at"], name="idempotency_expires")]

    def __str__(self) -> str:
        state = "in flight" if self.response_status is None else str(self.response_status)
        return f"idempotency key for token {self.token_id}: {state}"


class KeptAnswerName(models.Model):
    """One record or episode ID a kept answer names (:func:`access.idempotency.forget_kept_answers`).

    A purge looks its IDs up here, by index, instead of reading the bytes of
    every kept answer; the rows go with their answer.
    """

    answer = models.ForeignKey(IdempotencyKey, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["answer", "name"], name="kept_answer_name_once"),
        ]
        indexes = [models.Index(fields=["name"], name="kept_answer_name")]

    def __str__(self) -> str:
        return f"kept answer {self.answer_id} names {self.name}"


class RateLimitWindow(models.Model):
    """Requests a token made in one fixed one-minute window (:mod:`access.ratelimits`)."""

    token = models.ForeignKey(ApiToken, on_delete=models.CASCADE, related_name="+")
    window_start = models.BigIntegerField(help_text="Unix time of the window's first second")
    count = models.PositiveIntegerField(default=0)

    class Meta:
        db_table = "aetnaweb_ratelimitwindow"  # its name from before the move: no table is renamed
        constraints = [
            models.UniqueConstraint(
                fields=["token", "window_start"], name="ratelimit_unique_token_window"
            ),
        ]

    def __str__(self) -> str:
        return f"token {self.token_id}: {self.count} requests from {self.window_start}"


class Invitation(models.Model):
    """A one-time link that lets a teammate create their account and receive one grant.

    Only the SHA-256 of the link's token is stored (the link is shown once, to
    the admin who made it). It works once (``accepted_at``), until
    ``expires_at``, and not after ``revoked_at``; see :mod:`access.people`.
    """

    username = models.CharField(max_length=150)
    email = models.EmailField(blank=True, default="")
    scope = models.CharField(max_length=200)
    scope_tenant = models.CharField(max_length=64)
    scope_user = models.CharField(max_length=64)
    scope_project = models.CharField(max_length=64)
    role = models.CharField(max_length=16, choices=Role.choices)
    token_hash = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        indexes = [
            models.Index(
                fields=["scope_tenant", "scope_user", "scope_project"], name="invite_tree"
            ),
            models.Index(fields=["username"], name="invite_username"),
        ]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"invitation for {self.username} ({self.role} on {self.scope})"
