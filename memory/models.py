"""Memory data: episodes (L0), records (L1), retrieval events, and their indexes.

Every row that belongs to a scope stores it twice: the canonical string in
``scope`` (recall asks ``scope IN (<the lineage>)``, an exact match) and the
``tenant``/``user``/``project`` columns (subtree browsing by column equality).
Nothing here compares scopes by prefix.

Writes go through :mod:`memory.services` only; these classes hold data and
invariants, no workflows.
"""

from __future__ import annotations

from django.db import models


class Status(models.TextChoices):
    ACTIVE = "active", "Active"
    QUARANTINED = "quarantined", "Quarantined"
    SUPERSEDED = "superseded", "Superseded"
    TOMBSTONED = "tombstoned", "Tombstoned"


class SourceType(models.TextChoices):
    USER_MESSAGE = "user_message", "User message"
    WEBPAGE = "webpage", "Webpage"
    TOOL_OUTPUT = "tool_output", "Tool output"
    DERIVED = "derived", "Derived (proposed)"
    # An assistant's turn in an imported conversation: kept as an episode, never a record.
    ASSISTANT_MESSAGE = "assistant_message", "Assistant message"


class Role(models.TextChoices):
    """Who said a turn of an imported conversation (memory.inputs.ConversationTurn)."""

    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    TOOL = "tool", "Tool"
    OTHER = "other", "Another person"


class TrustTier(models.TextChoices):
    TRUSTED_USER = "trusted_user", "Trusted user"
    USER_CONFIRMED = "user_confirmed", "User confirmed"
    UNTRUSTED_CONTENT = "untrusted_content", "Untrusted content"


class ScopedRow(models.Model):
    """The two stored forms of a scope (see the module docstring)."""

    scope = models.CharField(max_length=200)
    tenant = models.CharField(max_length=64)
    user = models.CharField(max_length=64)
    project = models.CharField(max_length=64)

    class Meta:
        abstract = True


class Episode(ScopedRow):
    """L0: one message as received. Append-only; its text is purged on forget."""

    episode_id = models.CharField(max_length=40, unique=True)
    session_id = models.CharField(max_length=200, blank=True, default="")
    turn_id = models.CharField(max_length=200, blank=True, default="")
    source_type = models.CharField(max_length=20, choices=SourceType.choices)
    text = models.TextField(blank=True, default="")
    # Keys the salted message_sha256 its episode.ingested event commits
    # (memory/binding.py); cleared with the text, so the digest can no longer
    # be tested against guesses. Empty for episodes stored before salting.
    digest_salt = models.CharField(max_length=64, blank=True, default="", db_default="")
    # Who said it and in which role ("" for a plain remember, which has no speaker).
    speaker = models.CharField(max_length=100, blank=True, default="")
    role = models.CharField(max_length=12, choices=Role.choices, blank=True, default="")
    # When it was said, as the caller stated it; created_at is when it was stored.
    occurred_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    purged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["scope", "id"], name="mem_episode_scope_id"),
            models.Index(fields=["scope", "session_id", "id"], name="mem_episode_scope_session"),
        ]

    def __str__(self) -> str:
        return f"{self.episode_id} at {self.scope}"

    @property
    def is_purged(self) -> bool:
        return self.purged_at is not None


class Record(ScopedRow):
    """L1: one extracted fact with its provenance.

    The integer ``id`` orders records by creation and is the full-text
    index's row id; ``record_id`` is the public identifier.
    """

    record_id = models.CharField(max_length=40, unique=True)
    episode = models.ForeignKey(
        Episode,
        to_field="episode_id",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="records",
    )
    session_id = models.CharField(max_length=200, blank=True, default="")
    turn_id = models.CharField(max_length=200, blank=True, default="")
    source_type = models.CharField(max_length=20, choices=SourceType.choices)
    trust_tier = models.CharField(max_length=20, choices=TrustTier.choices)
    confidence = models.FloatField()
    status = models.CharField(max_length=12, choices=Status.choices)
    fact_key = models.CharField(max_length=200, blank=True, default="")
    kind = models.CharField(max_length=64, blank=True, default="")
    content = models.TextField(blank=True, default="")
    # sha256 of the normalised content (lower case, word tokens): duplicates
    # are found through an index on it, never by reading a scope's records.
    content_digest = models.CharField(max_length=64, blank=True, default="")
    # Episode or record IDs a proposed fact cites (propose_facts), or the turn a fact of an
    # imported conversation was extracted from (import_conversation); empty otherwise.
    evidence = models.JSONField(default=list, blank=True)
    # Caller-supplied flat key/values (memory/metadata.py); emptied on forget.
    # Indexed by migration 0009: GIN on PostgreSQL, a side table on SQLite.
    metadata = models.JSONField(default=dict, blank=True)
    # Keys the salted content, metadata and fact key digests the creation
    # event commits (memory/binding.py); purged with the content. Empty for
    # records stored before salting (their chain digests are plain SHA-256).
    digest_salt = models.CharField(max_length=64, blank=True, default="", db_default="")
    supersedes = models.ForeignKey(
        "self",
        to_field="record_id",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        db_column="supersedes_record_id",
    )
    superseded_by = models.ForeignKey(
        "self",
        to_field="record_id",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        db_column="superseded_by_record_id",
    )
    # When its source message was said (the episode's occurred_at), copied here
    # so recall returns it without a join; null when the caller gave no time.
    occurred_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True)
    # When the caller said the record lapses (remember's expires_at): from then
    # on recall skips it, and the next retention run purges it with its lineage.
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # recall and listing at one scope: scope IN (...) AND status = ...
            models.Index(fields=["scope", "status", "id"], name="mem_record_scope_status"),
            # subtree browsing by column equality
            models.Index(
                fields=["tenant", "user", "project", "status", "id"], name="mem_record_subtree"
            ),
            # duplicates
            models.Index(fields=["scope", "content_digest", "status"], name="mem_record_digest"),
            # supersession
            models.Index(fields=["scope", "fact_key", "status"], name="mem_record_fact_key"),
            # review queue across scopes
            models.Index(fields=["status", "id"], name="mem_record_status_id"),
            models.Index(fields=["scope", "session_id", "id"], name="mem_record_scope_session"),
            # a scope's page, newest first whatever the status: without it the
            # planner sorts every record of a busy scope to keep 51
            models.Index(fields=["scope", "id"], name="mem_record_scope_id"),
            # the retention run's "what lapsed" (only rows that carry a time)
            models.Index(
                fields=["expires_at"],
                name="mem_record_expires",
                condition=models.Q(expires_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.record_id} ({self.status}) at {self.scope}"


class RetrievalEvent(ScopedRow):
    """One recall: what was asked (as a digest), every candidate considered and what was returned."""

    retrieval_id = models.CharField(max_length=40, unique=True)
    session_id = models.CharField(max_length=200, blank=True, default="")
    actor = models.CharField(max_length=150)
    purpose = models.CharField(max_length=20, default="recall")  # recall | recall_block
    query_sha256 = models.CharField(max_length=64)
    # Raw query text only when settings.AETNAWEB_STORE_RECALL_QUERIES is on.
    query_text = models.TextField(blank=True, default="")
    limit = models.PositiveIntegerField()
    min_score = models.FloatField()
    candidates = models.JSONField(default=list)
    returned_ids = models.JSONField(default=list)
    audit_event_id = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["scope", "id"], name="mem_retrieval_scope_id"),
            # "Recalls in this session", linked from the audit explorer's session filter.
            models.Index(fields=["session_id", "id"], name="mem_retrieval_session_id"),
        ]

    def __str__(self) -> str:
        return f"{self.retrieval_id} at {self.scope}"


class RetrievalHit(models.Model):
    """An indexed "this recall considered (and maybe returned) that record" row."""

    retrieval_event = models.ForeignKey(
        RetrievalEvent, on_delete=models.CASCADE, related_name="hits"
    )
    record = models.ForeignKey(
        Record, to_field="record_id", on_delete=models.PROTECT, related_name="hits"
    )
    rank = models.PositiveIntegerField()
    score = models.FloatField()
    returned = models.BooleanField()

    class Meta:
        indexes = [models.Index(fields=["record", "retrieval_event"], name="mem_hit_record")]

    def __str__(self) -> str:
        return f"{self.record_id} in {self.retrieval_event_id}"


class RecordAuditLink(models.Model):
    """Which audit events name a record, so a record page finds them by index.

    Written by the services in the same transaction as the event; payloads
    that list several records (a forget, a supersession) get one row each.
    """

    record_id = models.CharField(max_length=40)
    event_sequence = models.BigIntegerField()
    event_id = models.CharField(max_length=40)
    event_type = models.CharField(max_length=100)

    class Meta:
        indexes = [models.Index(fields=["record_id", "event_sequence"], name="mem_link_record")]
        constraints = [
            models.UniqueConstraint(fields=["record_id", "event_id"], name="mem_link_unique")
        ]

    def __str__(self) -> str:
        return f"{self.record_id} -> {self.event_id}"


class DeletionReceipt(ScopedRow):
    """A deletion receipt as returned to the caller, kept so it can be shown again."""

    audit_event_id = models.CharField(max_length=40, unique=True)
    event_type = models.CharField(max_length=100)
    receipt = models.JSONField()
    record_count = models.PositiveIntegerField()
    created_at = models.DateTimeField()
    # The request's reference as typed (a ticket number); the event commits its digest.
    reference = models.CharField(max_length=200, blank=True, default="", db_default="")
    # The closing event of the forget bundle this receipt is part of ("" when alone).
    bundle_event_id = models.CharField(max_length=40, blank=True, default="", db_default="")

    class Meta:
        indexes = [models.Index(fields=["scope", "id"], name="mem_receipt_scope_id")]

    def __str__(self) -> str:
        return f"receipt for {self.audit_event_id}"


class ForgetBundle(ScopedRow):
    """A forget that reached scopes below the one chosen: its receipts, bundled and bound.

    ``scope`` is the scope the forget was asked at; ``document`` is the
    ``aetnaweb-forget-bundle-v1`` returned to the caller, kept to be shown again.
    """

    closing_event_id = models.CharField(max_length=40, unique=True)
    document = models.JSONField()
    reference = models.CharField(max_length=200, blank=True, default="")
    receipt_count = models.PositiveIntegerField()
    record_count = models.PositiveIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["scope", "id"], name="mem_bundle_scope_id")]

    def __str__(self) -> str:
        return f"forget bundle {self.closing_event_id}"


class ScopeStats(ScopedRow):
    """Per-scope counters, kept in step by the services, so browsing never counts records.

    One row per scope that has ever been written.
    """

    depth = models.PositiveSmallIntegerField()
    active = models.BigIntegerField(default=0)
    quarantined = models.BigIntegerField(default=0)
    superseded = models.BigIntegerField(default=0)
    tombstoned = models.BigIntegerField(default=0)
    episodes = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "scope stats"  # Django's default adds an "s": "scope statss"
        constraints = [models.UniqueConstraint(fields=["scope"], name="mem_stats_scope_unique")]
        indexes = [models.Index(fields=["tenant", "user", "project"], name="mem_stats_tree")]

    def __str__(self) -> str:
        return f"stats {self.scope}"


class ReviewReason(ScopedRow):
    """The reason a reviewer gave for promoting or rejecting a record, as typed.

    The audit chain keeps only its SHA-256 (it may quote content); this row
    lets those who may review the scope read it on the record's page.
    """

    audit_event_id = models.CharField(max_length=40, unique=True)
    record_id = models.CharField(max_length=40)
    decision = models.CharField(max_length=10)  # promote | reject
    reason = models.TextField()
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["record_id"], name="mem_review_reason_record")]

    def __str__(self) -> str:
        return f"{self.decision} {self.record_id}"


class LegalHold(ScopedRow):
    """A legal hold on a scope subtree (issue 32): while it holds, nothing under it is purged.

    Forget, a subject erasure, review's reject and any other purge of the
    engine's content are refused at or below ``scope``. Lifting keeps the row
    (``lifted_at``), so the page shows what held and when; both are audited.
    """

    hold_id = models.CharField(max_length=40, unique=True)
    reference = models.CharField(max_length=200)
    set_by = models.CharField(max_length=150)
    set_at = models.DateTimeField()
    lifted_by = models.CharField(max_length=150, blank=True, default="")
    lifted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["scope", "lifted_at"], name="mem_hold_scope")]
        constraints = [
            # One hold at a time per scope: a second would be the same promise twice.
            models.UniqueConstraint(
                fields=["scope"], condition=models.Q(lifted_at__isnull=True), name="mem_hold_one"
            )
        ]

    def __str__(self) -> str:
        return f"legal hold {self.hold_id} on {self.scope}"


class RetentionTarget(models.TextChoices):
    """What a retention policy keeps for a while (issue 32 item 3)."""

    # Stored messages: their text is cleared; the facts drawn from them stay.
    EPISODES = "episodes", "Stored messages (episodes)"
    # Quarantined facts nobody promoted: purged with their supersession lineage.
    QUARANTINED = "quarantined", "Quarantined records"
    # Every record still holding content: purged with its lineage once the
    # lineage's newest value is older than the keep.
    RECORDS = "records", "All records"


class RetentionPolicy(ScopedRow):
    """Keep ``target`` under ``scope`` (the scope and every scope below it) for ``keep_days``.

    Set and removed by admins of the subtree through
    :mod:`memory.services.retention` (both audited); the scheduled retention
    run purges what lapsed. Without a policy, content is kept until forgotten.
    """

    policy_id = models.CharField(max_length=40, unique=True)
    target = models.CharField(max_length=20, choices=RetentionTarget.choices)
    keep_days = models.PositiveIntegerField()
    set_by = models.CharField(max_length=150)
    set_at = models.DateTimeField()
    # The last real run that applied it, and what that run purged under it.
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_run_records = models.PositiveIntegerField(default=0)
    last_run_episodes = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name_plural = "retention policies"
        indexes = [models.Index(fields=["tenant", "user", "project"], name="mem_retention_tree")]
        constraints = [
            # One keep per kind of content per subtree: setting again replaces it.
            models.UniqueConstraint(fields=["scope", "target"], name="mem_retention_one")
        ]

    def __str__(self) -> str:
        return f"keep {self.target} {self.keep_days} days under {self.scope}"
