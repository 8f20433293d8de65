"""Domain errors of the memory engine, each with a message a person can act on.

All derive from :class:`MemoryEngineError` (a ``ValueError`` and a
:class:`aetnaweb.errors.DomainError`), so views, the API and commands turn any
of them into a form error, a 4xx answer or one line on stderr. Each class
states the code and status the API answers with (the catalogue in
docs/agents.md). Invalid scopes raise :class:`aetnaweb.scopes.ScopeError`.
"""

from __future__ import annotations

from aetnaweb import errors
from aetnaweb.errors import DomainError


class MemoryEngineError(DomainError, ValueError):
    """Base class: a request the memory engine refuses."""

    code = "memory_engine_error"
    status = 400
    meaning = "another refusal of the memory engine"


class RecordNotFound(MemoryEngineError):
    """No record with that ID at the scope named (it may exist elsewhere: we do not say).

    A 400 when a body names the ID (forget's ``record_ids``); endpoints whose
    path names the record answer 404 ``not_found`` instead.
    """

    code = "record_not_found"
    status = 400
    meaning = "a record ID is not one of this scope's records"
    missing = True


class EpisodeNotFound(MemoryEngineError):
    """No episode (stored message) with that ID at the scope named (it may exist elsewhere)."""

    code = "episode_not_found"
    status = 400
    meaning = "an episode ID is not one of this scope's episodes"
    missing = True


class RecordStateError(MemoryEngineError):
    """The record exists at that scope but its status does not allow the operation."""

    code = "record_state_error"
    status = 409
    meaning = "the records are not in the state the request assumed"


class SelectorError(MemoryEngineError):
    """A forget request that names nothing (empty selector, no IDs, no needle), or too much.

    ``reason`` is a short code recorded in the ``memory.forget_rejected`` event
    and sent as the API's ``error``.
    """

    code = "selector_error"
    status = 400
    meaning = "a forget request is refused (see detail)"
    extra_codes = {
        "ambiguous_request": "a forget gives more than one of selector, record_ids, utterance, "
        "episode_ids, session_id",
        "nothing_matched": "a forget matches no record or stored message at exactly this scope",
        "vague_selector": "a forget names no particular thing (e.g. 'forget everything')",
        "preview_required": "a forget this large needs the previewed expected_record_ids and "
        "expected_episode_ids",
        "empty_selector": "a forget selector matches no words",
        "too_broad": "a forget would purge too much without expected_record_ids",
        "bad_record_ids": "forget record_ids are not records of this scope",
        "bad_episode_ids": "forget episode_ids is not a list of episode IDs",
        "embedded_content": "a forget selector holds content that looks like a memory block",
    }

    def __init__(
        self, message: str, *, reason: str = "empty_selector", field: str | None = None
    ) -> None:
        super().__init__(message, field=field)
        self.reason = reason
        self.instance_code = reason


class ForgetPreviewStale(MemoryEngineError):
    """The records a forget would purge are no longer the ones previewed."""

    code = "forget_preview_stale"
    status = 409
    meaning = "what the forget matches changed since the preview"


class ForgetNotConfirmed(MemoryEngineError):
    """A forget of more than ten records and messages whose count was not typed back right."""

    code = "forget_count_not_confirmed"
    status = 400
    meaning = (
        "a forget of more than 10 records and messages needs confirm_count, the number it "
        "purges, typed back (missing or wrong)"
    )

    def __init__(self, message: str, *, field: str | None = "confirm_count") -> None:
        super().__init__(message, field=field)


class ForgetSelectionError(MemoryEngineError):
    """Rows unticked in a forget's preview that leave no forget to apply as asked."""

    code = "forget_selection_error"
    status = 400
    meaning = (
        "the rows left out of a forget (exclude_record_ids, exclude_episode_ids) split a "
        "lineage, name what the preview did not list, or leave nothing"
    )


class ExtractionError(MemoryEngineError):
    """Input that cannot be stored as asked (empty text, bad key/value, unknown source type)."""

    code = "extraction_error"
    status = 400
    meaning = "the text cannot be remembered as given (see detail)"


class CaptureError(MemoryEngineError):
    """A capture call with an unknown role."""

    code = "capture_error"
    status = 400
    meaning = "the turn cannot be captured (e.g. an unknown role)"


class ProposalError(MemoryEngineError):
    """A batch of proposed facts that is not a list of objects."""

    code = "proposal_error"
    status = 400
    meaning = "the proposed facts are refused as a whole"


class ActionLogError(MemoryEngineError):
    """An ``agent.*`` event the caller may not log (bad type or payload); ``field`` says which."""

    code = "action_log_error"
    status = 400
    meaning = "the agent.* event type or payload is refused"

    def __init__(self, message: str, *, field: str = "payload") -> None:
        super().__init__(message, field=field)


class QueryError(MemoryEngineError):
    """A listing filter or cursor that is not valid (unknown status, bad cursor, bad limit)."""

    code = "query_error"
    status = 400
    meaning = "the recall query is refused"


class InvalidInput(MemoryEngineError, errors.InvalidInput):
    """A bad argument (a reason too long, a limit out of range, a query that is not text).

    Not a :class:`RecordStateError` (the records are fine) nor an
    :class:`ExtractionError` (nothing was being extracted): a 400 naming the field.
    """

    code = "invalid_field"
    status = 400
    meaning = "a field does not validate (see field and detail)"


class SubjectErasureError(MemoryEngineError):
    """An erasure of a person's subtree that cannot start: no reference, no typed confirmation,
    a scope above one person, or nothing stored under it."""

    code = "subject_erasure_refused"
    status = 400
    meaning = "a subject erasure is refused (see detail); nothing was erased"


class SubjectExportError(SubjectErasureError):
    """An export of a person's subtree that cannot start (no reference, a scope above one
    person). A subclass of :class:`SubjectErasureError`, which it answered as before."""

    code = "subject_export_refused"
    status = 400
    meaning = "a subject export is refused (see detail); nothing was exported"


class SubjectExportNotReady(SubjectExportError):
    """The export's file is asked for before its job finished (or after it failed)."""

    code = "subject_export_not_ready"
    status = 409
    meaning = "the subject export has not finished (poll its status), or it failed"


class SubjectExportExpired(SubjectExportError):
    """The export's file is past its keep-by, or was purged (by retention or an erasure)."""

    code = "subject_export_expired"
    status = 410
    meaning = "the subject export's file expired and was purged: start a new export"


class LegalHoldError(MemoryEngineError):
    """A purge under a legal hold, or a hold that cannot be set or lifted as asked."""

    code = "legal_hold"
    status = 409
    meaning = "a legal hold is in force here (purges are refused), or the hold request conflicts"


class AetnamemImportError(MemoryEngineError):
    """An aetnamem database that cannot be moved in as given (not SQLite, another schema,
    a chain that does not verify, a subject without a scope): nothing was imported."""

    code = "aetnamem_import_refused"
    status = 400
    meaning = "an aetnamem import is refused (see detail); nothing was imported"


class WarningNotAcknowledged(MemoryEngineError):
    """A promotion of a fact that reads like an instruction to the agent or holds a credential,
    without the reviewer acknowledging the warning shown on it."""

    code = "warning_not_acknowledged"
    status = 400
    meaning = "promoting a flagged fact needs its warning acknowledged; nothing was promoted"


class SourceFactsWaiting(MemoryEngineError):
    """A rejection that leaves facts from the same source message waiting: rejecting purges
    the source, so the facts of one source are decided together."""

    code = "source_facts_waiting"
    status = 400
    meaning = "a rejection must take every waiting fact of its source; nothing was rejected"


class RetentionPolicyError(MemoryEngineError):
    """A retention policy that cannot be set or removed as asked: an unknown target, a keep
    that is not a whole number of days in range, or no policy to remove."""

    code = "retention_policy_refused"
    status = 400
    meaning = "a retention policy cannot be set or removed as asked (see detail); nothing changed"
