"""Sync and async clients for every ``/api/v1`` endpoint, over httpx.

Each endpoint is described once (:class:`_Call`: method, path, query, body);
:class:`Client` and :class:`AsyncClient` only differ in how they send it.
Every write carries a fresh ``Idempotency-Key`` (one per call, the same on
each of its attempts), so a retried write is answered from the first answer
instead of storing twice. GETs are retried on connection failures and
502/503/504; every call, writes included, is retried on 429 after the
server's ``Retry-After`` (at most ``rate_limit_retries`` times, each wait
capped at ``max_retry_after`` seconds), then raises
:class:`~aetnaweb_client.errors.RateLimited` carrying ``retry_after``. A 429
is never kept for a key, so the retry runs the write.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast
from urllib.parse import quote

import httpx

from aetnaweb_client.errors import TransportError, error_for, retry_after_of
from aetnaweb_client.types import (
    JSON,
    ForgetPreview,
    ImportResult,
    RecallBlock,
    RecallResult,
    Record,
    RememberResult,
    TokenInfo,
)

RETRY_STATUSES = frozenset({502, 503, 504})
RATE_LIMITED = 429
DEFAULT_TIMEOUT = 30.0
IDEMPOTENCY_HEADER = "Idempotency-Key"


@dataclass(frozen=True)
class _Call:
    method: Literal["GET", "POST"]
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    raw: bool = False  # JSON Lines (audit export and checkpoint): return the text
    binary: bool = False  # a file (a subject export's ZIP): return the bytes

    @property
    def idempotent(self) -> bool:
        return self.method == "GET"


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _bounds(created_at: Mapping[str, datetime | str]) -> dict[str, str | None]:
    return {operator: _time(bound) for operator, bound in created_at.items()}


def _with_filters(body: dict[str, Any]) -> dict[str, Any]:
    """Move ``metadata`` and ``created_at`` filter arguments to the body's ``filters`` object.

    A metadata value asks for exactly that typed value; a dict applies operators:
    ``{"score": {"$gte": 3}, "tier": {"$in": ["gold", "silver"]}}`` ($eq, $ne, $in,
    $gt, $gte, $lt, $lte). ``created_at`` bounds the storage time:
    ``{"$gte": datetime(2026, 1, 1, tzinfo=UTC)}``.
    """
    wanted = body.pop("metadata", None)
    created_at = body.pop("created_at", None)
    filters: dict[str, Any] = {}
    if wanted is not None:
        filters["metadata"] = dict(wanted)
    if created_at is not None:
        filters["created_at"] = _bounds(created_at)
    if filters:
        body["filters"] = filters
    return body


def _metadata_params(params: dict[str, Any]) -> dict[str, Any]:
    """Spell the filters as the query string does: ``metadata.<key>=<JSON>``,
    ``metadata.<key>.$<op>=<JSON>`` and ``created_at.$<op>=<ISO 8601>``.

    JSON values keep the type: ``{"customer_id": 42}`` asks for the number,
    ``{"customer_id": "42"}`` for the string.
    """
    wanted = params.pop("metadata", None) or {}
    for key, value in wanted.items():
        if isinstance(value, Mapping):
            for operator, operand in value.items():
                params[f"metadata.{key}.{operator}"] = json.dumps(operand, allow_nan=False)
        else:
            params[f"metadata.{key}"] = json.dumps(value, allow_nan=False)
    for operator, bound in _bounds(params.pop("created_at", None) or {}).items():
        params[f"created_at.{operator}"] = bound
    return params


def _time(value: datetime | str | None) -> str | None:
    """A datetime as ISO 8601 (it must carry a zone: the server refuses one without)."""
    return value.isoformat() if isinstance(value, datetime) else value


def _turns(turns: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [_drop_none({**turn, "occurred_at": _time(turn.get("occurred_at"))}) for turn in turns]


def _segment(value: str) -> str:
    # An ID goes into the path: quote everything, so "../" or "?" cannot change the URL.
    return quote(value, safe="")


class _Calls:
    """The endpoints, as calls; shared by both clients."""

    @staticmethod
    def whoami() -> _Call:
        return _Call("GET", "token")

    @staticmethod
    def remember(scope: str, **fields: Any) -> _Call:
        return _Call("POST", "memory/remember", body=_drop_none({"scope": scope, **fields}))

    @staticmethod
    def import_conversation(scope: str, turns: Sequence[Mapping[str, Any]]) -> _Call:
        body = {"scope": scope, "turns": _turns(turns)}
        return _Call("POST", "memory/conversations/import", body=body)

    @staticmethod
    def capture(scope: str, role: str, content: str, **fields: Any) -> _Call:
        body = {"scope": scope, "role": role, "content": content, **fields}
        return _Call("POST", "memory/capture", body=_drop_none(body))

    @staticmethod
    def forget(preview: bool, scope: str, **fields: Any) -> _Call:
        path = "memory/forget/preview" if preview else "memory/forget"
        return _Call("POST", path, body=_drop_none({"scope": scope, **fields}))

    @staticmethod
    def propose(scope: str, facts: list[dict[str, Any]]) -> _Call:
        return _Call("POST", "memory/propose", body={"scope": scope, "facts": facts})

    @staticmethod
    def log_action(scope: str, event_type: str, payload: dict[str, Any], **fields: Any) -> _Call:
        body = {"scope": scope, "event_type": event_type, "payload": payload, **fields}
        return _Call("POST", "memory/log-action", body=_drop_none(body))

    @staticmethod
    def recall(scope: str, query: str, **fields: Any) -> _Call:
        body = {"scope": scope, "query": query, **fields}
        return _Call("POST", "memory/recall", body=_with_filters(_drop_none(body)))

    @staticmethod
    def recall_block(scope: str, query: str, **fields: Any) -> _Call:
        body = {"scope": scope, "query": query, **fields}
        return _Call("POST", "memory/recall-block", body=_with_filters(_drop_none(body)))

    @staticmethod
    def persona(scope: str, max_chars: int | None) -> _Call:
        body = _drop_none({"scope": scope, "max_chars": max_chars})
        return _Call("POST", "memory/persona", body=body)

    @staticmethod
    def scenes(scope: str, limit: int | None, after: str | None) -> _Call:
        params = _drop_none({"scope": scope, "limit": limit, "after": after})
        return _Call("GET", "memory/scenes", params=params)

    @staticmethod
    def list_records(scope: str, **filters: Any) -> _Call:
        params = _metadata_params(_drop_none({"scope": scope, **filters}))
        return _Call("GET", "memory/records", params=params)

    @staticmethod
    def get_record(record_id: str) -> _Call:
        return _Call("GET", f"memory/records/{_segment(record_id)}")

    @staticmethod
    def stage(scope: str, operations: list[dict[str, Any]], **fields: Any) -> _Call:
        body = {"scope": scope, "operations": operations, **fields}
        return _Call("POST", "actions/stage", body=_drop_none(body))

    @staticmethod
    def list_transactions(**filters: Any) -> _Call:
        return _Call("GET", "actions/", params=_drop_none(filters))

    @staticmethod
    def get_transaction(transaction_id: str) -> _Call:
        return _Call("GET", f"actions/{_segment(transaction_id)}")

    @staticmethod
    def verify_transaction(transaction_id: str) -> _Call:
        return _Call("GET", f"actions/{_segment(transaction_id)}/verify")

    @staticmethod
    def verify_audit(scope: str | None) -> _Call:
        return _Call("GET", "audit/verify", params=_drop_none({"scope": scope}))

    @staticmethod
    def export_audit(subject: str | None) -> _Call:
        return _Call("GET", "audit/export", params=_drop_none({"subject": subject}), raw=True)

    @staticmethod
    def create_checkpoint() -> _Call:
        return _Call("POST", "audit/checkpoint", body={}, raw=True)

    @staticmethod
    def export_subject(scope: str, reference: str) -> _Call:
        return _Call("POST", "memory/export-subject", body={"scope": scope, "reference": reference})

    @staticmethod
    def subject_export(job_id: int) -> _Call:
        return _Call("GET", f"memory/subject-exports/{int(job_id)}")

    @staticmethod
    def download_subject_export(job_id: int) -> _Call:
        return _Call("GET", f"memory/subject-exports/{int(job_id)}/download", binary=True)


def _decode(response: httpx.Response, call: _Call) -> Any:
    if response.is_success:
        if call.binary:
            return response.content
        if call.raw:
            return response.text
        try:
            return response.json()
        except ValueError as exc:
            raise TransportError(f"the server answered non-JSON for {call.path}") from exc
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    raise error_for(response.status_code, body, response.headers.get("Retry-After"))


def _base_url(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/api/v1") else f"{url}/api/v1"


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/json"}


def _backoff(attempt: int, base: float) -> float:
    return float(base * (2**attempt))


def _call_headers(call: _Call) -> dict[str, str] | None:
    # One key per call, reused by its retries: that is what makes a retry a replay.
    return None if call.idempotent else {IDEMPOTENCY_HEADER: str(uuid.uuid4())}


def _rate_limit_wait(response: httpx.Response, attempt: int, base: float, cap: float) -> float:
    """The server's Retry-After (exponential backoff if it sent none), at most ``cap``."""
    told = retry_after_of(response.headers.get("Retry-After"))
    return min(cap, told if told is not None else _backoff(attempt, base))


class Client:
    """A blocking client. ``Client("http://127.0.0.1:8000", token="aetna_...")``.

    Refusals raise :class:`~aetnaweb_client.errors.ApiError` subclasses carrying
    the JSON ``code`` and ``field``. GETs are retried ``retries`` times on
    connection errors and 502/503/504; every call is retried
    ``rate_limit_retries`` times on 429 after ``Retry-After`` (capped at
    ``max_retry_after`` seconds), then raises ``RateLimited``. Every write
    sends an ``Idempotency-Key``.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 2,
        backoff: float = 0.2,
        rate_limit_retries: int = 2,
        max_retry_after: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=_base_url(url) + "/",
            headers=_headers(token),
            timeout=timeout,
            transport=transport,
        )
        self.retries = retries
        self.backoff = backoff
        self.rate_limit_retries = rate_limit_retries
        self.max_retry_after = max_retry_after

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _run(self, call: _Call) -> Any:
        headers = _call_headers(call)
        attempts = 1 + (self.retries if call.idempotent else 0)
        attempt = limited = 0
        while True:
            last = attempt >= attempts - 1
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.params or None,
                    json=call.body,
                    headers=headers,
                )
            except httpx.TransportError as exc:
                if last:
                    raise TransportError(f"{call.method} {call.path}: {exc}") from exc
            else:
                if response.status_code == RATE_LIMITED:
                    # Nothing was done; waiting as told is always safe, writes included.
                    if limited >= self.rate_limit_retries:
                        return _decode(response, call)
                    wait = _rate_limit_wait(response, limited, self.backoff, self.max_retry_after)
                    limited += 1
                    time.sleep(wait)
                    continue
                if response.status_code not in RETRY_STATUSES or last:
                    return _decode(response, call)
            time.sleep(_backoff(attempt, self.backoff))
            attempt += 1

    # -- the token -----------------------------------------------------------------

    def whoami(self) -> TokenInfo:
        """The calling token's scope subtree, capabilities and expiry."""
        return cast(TokenInfo, self._run(_Calls.whoami()))

    # -- memory writes ---------------------------------------------------------------

    def remember(
        self,
        scope: str,
        text: str | None = None,
        *,
        key: str | None = None,
        value: str | None = None,
        kind: str | None = None,
        session_id: str | None = None,
        turn_id: str | None = None,
        source_type: str | None = None,
        force: bool | None = None,
        metadata: dict[str, Any] | None = None,
        occurred_at: datetime | str | None = None,
        expires_at: datetime | str | None = None,
    ) -> RememberResult:
        """Store a message (``text``) or an explicit ``key``/``value`` at exactly ``scope``.

        ``metadata`` (flat JSON key/values) is stored with every record made;
        ``occurred_at`` (with a time zone) is when the message was said;
        ``expires_at`` (with a time zone, in the future) is when the records
        lapse: recall skips them from then on and retention purges them.
        """
        call = _Calls.remember(
            scope,
            text=text,
            key=key,
            value=value,
            kind=kind,
            session_id=session_id,
            turn_id=turn_id,
            source_type=source_type,
            force=force,
            metadata=metadata,
            occurred_at=_time(occurred_at),
            expires_at=_time(expires_at),
        )
        return cast(RememberResult, self._run(call))

    def import_conversation(self, scope: str, turns: Sequence[Mapping[str, Any]]) -> ImportResult:
        """Import a conversation's turns (``text``, ``role``, ``speaker``, ``occurred_at``,
        ``turn_id``, ``session_id``) at exactly ``scope``, all or nothing.

        Human turns are kept word for word; what each role keeps is in docs/agents.md.
        """
        return cast(ImportResult, self._run(_Calls.import_conversation(scope, turns)))

    def capture(
        self,
        scope: str,
        role: str,
        content: str,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
        occurred_at: datetime | str | None = None,
    ) -> JSON:
        """A host's turn hook: a ``user`` turn is remembered, others leave a digest."""
        call = _Calls.capture(
            scope,
            role,
            content,
            session_id=session_id,
            turn_id=turn_id,
            occurred_at=_time(occurred_at),
        )
        return cast(JSON, self._run(call))

    def forget_preview(
        self,
        scope: str,
        *,
        selector: str | None = None,
        record_ids: list[str] | None = None,
        utterance: str | None = None,
        episode_ids: list[str] | None = None,
        session_id: str | None = None,
        include_below: bool = False,
    ) -> ForgetPreview:
        """What a forget would purge: records and stored messages (writes nothing).

        ``below`` names the same words' matches in the scopes below; with
        ``include_below`` they are in the lists and the ``count`` too. Send
        ``count`` back as ``confirm_count`` when it is above ``confirm_above``.
        """
        call = _Calls.forget(
            True,
            scope,
            selector=selector,
            record_ids=record_ids,
            utterance=utterance,
            episode_ids=episode_ids,
            session_id=session_id,
            include_below=include_below or None,
        )
        return cast(ForgetPreview, self._run(call))

    def forget(
        self,
        scope: str,
        *,
        selector: str | None = None,
        record_ids: list[str] | None = None,
        utterance: str | None = None,
        episode_ids: list[str] | None = None,
        session_id: str | None = None,
        expected_record_ids: list[str] | None = None,
        expected_episode_ids: list[str] | None = None,
        include_below: bool = False,
        exclude_record_ids: list[str] | None = None,
        exclude_episode_ids: list[str] | None = None,
        confirm_count: int | None = None,
        reference: str | None = None,
    ) -> JSON:
        """Purge matching records and stored messages at ``scope``; returns the deletion
        receipt, or with ``include_below`` the bundle of one receipt per scope
        (``aetnaweb-forget-bundle-v1``).

        Above 10 records and messages, ``confirm_count`` must be the preview's
        ``count`` (less the rows left out with ``exclude_*``); ``reference`` (a
        ticket number) is kept with the receipts.
        """
        call = _Calls.forget(
            False,
            scope,
            selector=selector,
            record_ids=record_ids,
            utterance=utterance,
            episode_ids=episode_ids,
            session_id=session_id,
            expected_record_ids=expected_record_ids,
            expected_episode_ids=expected_episode_ids,
            include_below=include_below or None,
            exclude_record_ids=exclude_record_ids,
            exclude_episode_ids=exclude_episode_ids,
            confirm_count=confirm_count,
            reference=reference,
        )
        return cast(JSON, self._run(call))

    def propose(self, scope: str, facts: list[dict[str, Any]]) -> JSON:
        """Propose facts citing evidence IDs; accepted ones wait in quarantine for a person."""
        return cast(JSON, self._run(_Calls.propose(scope, facts)))

    def log_action(
        self,
        scope: str,
        event_type: str,
        payload: dict[str, Any],
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
    ) -> JSON:
        """Append an ``agent.*`` event (digests, IDs, counts: never content) to the chain."""
        call = _Calls.log_action(scope, event_type, payload, session_id=session_id, turn_id=turn_id)
        return cast(JSON, self._run(call))

    # -- memory reads ------------------------------------------------------------------

    def recall(
        self,
        scope: str,
        query: str,
        *,
        limit: int | None = None,
        min_score: float | None = None,
        min_confidence: float | None = None,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        created_at: Mapping[str, datetime | str] | None = None,
    ) -> RecallResult:
        """The most relevant active memories visible from ``scope`` (audited).

        ``metadata`` keeps only records holding exactly those typed values, or
        meeting operators (``{"score": {"$gte": 3}}``: $eq, $ne, $in, $gt, $gte,
        $lt, $lte); ``created_at`` keeps those stored in a range (``{"$gte": dt}``).
        ``min_confidence`` left out means the server's one default threshold;
        ``abstained`` in the answer is true when no memory fits.
        """
        call = _Calls.recall(
            scope,
            query,
            limit=limit,
            min_score=min_score,
            min_confidence=min_confidence,
            session_id=session_id,
            metadata=metadata,
            created_at=created_at,
        )
        return cast(RecallResult, self._run(call))

    def recall_block(
        self,
        scope: str,
        query: str,
        *,
        max_items: int | None = None,
        max_chars: int | None = None,
        min_score: float | None = None,
        min_confidence: float | None = None,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        created_at: Mapping[str, datetime | str] | None = None,
    ) -> RecallBlock:
        """A ``<relevant_memories>`` block for a prompt (empty text, ``abstained``, when nothing fits)."""
        call = _Calls.recall_block(
            scope,
            query,
            max_items=max_items,
            max_chars=max_chars,
            min_score=min_score,
            min_confidence=min_confidence,
            session_id=session_id,
            metadata=metadata,
            created_at=created_at,
        )
        return cast(RecallBlock, self._run(call))

    def persona(self, scope: str, *, max_chars: int | None = None) -> JSON:
        """The bounded persona text of the active facts visible from ``scope``."""
        return cast(JSON, self._run(_Calls.persona(scope, max_chars)))

    def scenes(self, scope: str, *, limit: int | None = None, after: str | None = None) -> JSON:
        """One page of scenes (``next_cursor`` leads on); see :meth:`iter_scenes`."""
        return cast(JSON, self._run(_Calls.scenes(scope, limit, after)))

    def iter_scenes(self, scope: str, *, page_size: int = 50) -> Iterator[JSON]:
        """Every scene at ``scope``, newest first, following the cursor."""
        after: str | None = None
        while True:
            page = self.scenes(scope, limit=page_size, after=after)
            yield from page["items"]
            after = page.get("next_cursor")
            if not after:
                return

    def list_records(self, scope: str, **filters: Any) -> JSON:
        """One page of records (filters: status, source_type, trust_tier, session_id, text,
        include_descendants, metadata={"key": typed value or {"$op": operand}},
        created_at={"$gte": datetime}, after, limit); see :meth:`iter_records`."""
        return cast(JSON, self._run(_Calls.list_records(scope, **filters)))

    def iter_records(self, scope: str, *, page_size: int = 100, **filters: Any) -> Iterator[Record]:
        """Every record at ``scope`` matching ``filters``, newest first, following the cursor."""
        after: str | None = None
        while True:
            page = self.list_records(scope, limit=page_size, after=after, **filters)
            yield from page["items"]
            after = page.get("next_cursor")
            if not after:
                return

    def get_record(self, record_id: str) -> JSON:
        """One record with its supersession chain, episode, audit events and recalls."""
        return cast(JSON, self._run(_Calls.get_record(record_id)))

    # -- guarded actions ---------------------------------------------------------------------

    def stage(
        self,
        scope: str,
        operations: list[dict[str, Any]],
        *,
        mode: str | None = None,
        session_id: str | None = None,
        turn_id: str | None = None,
    ) -> JSON:
        """Stage an exact plan for a person to approve in the dashboard."""
        call = _Calls.stage(scope, operations, mode=mode, session_id=session_id, turn_id=turn_id)
        return cast(JSON, self._run(call))

    def list_transactions(
        self,
        *,
        scope: str | None = None,
        state: list[str] | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> JSON:
        """One page of transactions; see :meth:`iter_transactions`."""
        call = _Calls.list_transactions(scope=scope, state=state, after=after, limit=limit)
        return cast(JSON, self._run(call))

    def iter_transactions(
        self, *, scope: str | None = None, state: list[str] | None = None, page_size: int = 50
    ) -> Iterator[JSON]:
        """Every transaction the token may read, newest first, following the cursor."""
        after: str | None = None
        while True:
            page = self.list_transactions(scope=scope, state=state, after=after, limit=page_size)
            yield from page["items"]
            after = page.get("next_cursor")
            if not after:
                return

    def get_transaction(self, transaction_id: str) -> JSON:
        return cast(JSON, self._run(_Calls.get_transaction(transaction_id)))

    def verify_transaction(self, transaction_id: str) -> JSON:
        return cast(JSON, self._run(_Calls.verify_transaction(transaction_id)))

    # -- audit ------------------------------------------------------------------------------

    def verify_audit(self, *, scope: str | None = None) -> JSON:
        """Verify the audit chains inside the token's subtree (or ``scope``)."""
        return cast(JSON, self._run(_Calls.verify_audit(scope)))

    def export_audit(self, *, subject: str | None = None) -> str:
        """Audit events as JSON Lines text."""
        return cast(str, self._run(_Calls.export_audit(subject)))

    def create_checkpoint(self) -> str:
        """A new ``aetnamem-checkpoint-v1`` line: keep it outside the server."""
        return cast(str, self._run(_Calls.create_checkpoint()))

    # -- requests about a person -----------------------------------------------------------

    def export_subject(self, scope: str, *, reference: str) -> JSON:
        """Start exporting everything under one person's subtree (``acme:dana:*``) as a job;
        ``reference`` names the request. Needs every capability on a grant covering it."""
        return cast(JSON, self._run(_Calls.export_subject(scope, reference)))

    def subject_export(self, job_id: int) -> JSON:
        """The export's status, progress (``done`` of ``total``), counts and ``expires_at``."""
        return cast(JSON, self._run(_Calls.subject_export(job_id)))

    def wait_for_subject_export(
        self, job_id: int, *, poll: float = 1.0, timeout: float = 600.0
    ) -> JSON:
        """Poll until the export is no longer running; its last status (``done`` or ``error``)."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.subject_export(job_id)
            if status["status"] != "running" or time.monotonic() >= deadline:
                return status
            time.sleep(poll)

    def download_subject_export(self, job_id: int) -> bytes:
        """The finished export's ZIP (export.json and the CSV files). Raises
        :class:`~aetnaweb_client.errors.Conflict` (``subject_export_not_ready``) while it runs
        and :class:`~aetnaweb_client.errors.Gone` (``subject_export_expired``) once purged."""
        return cast(bytes, self._run(_Calls.download_subject_export(job_id)))


class AsyncClient:
    """The same endpoints as :class:`Client`, awaitable, over ``httpx.AsyncClient``."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 2,
        backoff: float = 0.2,
        rate_limit_retries: int = 2,
        max_retry_after: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=_base_url(url) + "/",
            headers=_headers(token),
            timeout=timeout,
            transport=transport,
        )
        self.retries = retries
        self.backoff = backoff
        self.rate_limit_retries = rate_limit_retries
        self.max_retry_after = max_retry_after

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _run(self, call: _Call) -> Any:
        headers = _call_headers(call)
        attempts = 1 + (self.retries if call.idempotent else 0)
        attempt = limited = 0
        while True:
            last = attempt >= attempts - 1
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    params=call.params or None,
                    json=call.body,
                    headers=headers,
                )
            except httpx.TransportError as exc:
                if last:
                    raise TransportError(f"{call.method} {call.path}: {exc}") from exc
            else:
                if response.status_code == RATE_LIMITED:
                    # Nothing was done; waiting as told is always safe, writes included.
                    if limited >= self.rate_limit_retries:
                        return _decode(response, call)
                    wait = _rate_limit_wait(response, limited, self.backoff, self.max_retry_after)
                    limited += 1
                    await asyncio.sleep(wait)
                    continue
                if response.status_code not in RETRY_STATUSES or last:
                    return _decode(response, call)
            await asyncio.sleep(_backoff(attempt, self.backoff))
            attempt += 1

    async def whoami(self) -> TokenInfo:
        return cast(TokenInfo, await self._run(_Calls.whoami()))

    async def remember(self, scope: str, text: str | None = None, **fields: Any) -> RememberResult:
        """As :meth:`Client.remember` (keywords: key, value, kind, session_id, turn_id,
        source_type, force)."""
        if "occurred_at" in fields:
            fields["occurred_at"] = _time(fields["occurred_at"])
        return cast(RememberResult, await self._run(_Calls.remember(scope, text=text, **fields)))

    async def import_conversation(
        self, scope: str, turns: Sequence[Mapping[str, Any]]
    ) -> ImportResult:
        """As :meth:`Client.import_conversation`."""
        return cast(ImportResult, await self._run(_Calls.import_conversation(scope, turns)))

    async def capture(self, scope: str, role: str, content: str, **fields: Any) -> JSON:
        if "occurred_at" in fields:
            fields["occurred_at"] = _time(fields["occurred_at"])
        return cast(JSON, await self._run(_Calls.capture(scope, role, content, **fields)))

    async def forget_preview(self, scope: str, **fields: Any) -> ForgetPreview:
        return cast(ForgetPreview, await self._run(_Calls.forget(True, scope, **fields)))

    async def forget(self, scope: str, **fields: Any) -> JSON:
        return cast(JSON, await self._run(_Calls.forget(False, scope, **fields)))

    async def propose(self, scope: str, facts: list[dict[str, Any]]) -> JSON:
        return cast(JSON, await self._run(_Calls.propose(scope, facts)))

    async def log_action(
        self, scope: str, event_type: str, payload: dict[str, Any], **fields: Any
    ) -> JSON:
        return cast(JSON, await self._run(_Calls.log_action(scope, event_type, payload, **fields)))

    async def recall(self, scope: str, query: str, **fields: Any) -> RecallResult:
        return cast(RecallResult, await self._run(_Calls.recall(scope, query, **fields)))

    async def recall_block(self, scope: str, query: str, **fields: Any) -> RecallBlock:
        return cast(RecallBlock, await self._run(_Calls.recall_block(scope, query, **fields)))

    async def persona(self, scope: str, *, max_chars: int | None = None) -> JSON:
        return cast(JSON, await self._run(_Calls.persona(scope, max_chars)))

    async def scenes(
        self, scope: str, *, limit: int | None = None, after: str | None = None
    ) -> JSON:
        return cast(JSON, await self._run(_Calls.scenes(scope, limit, after)))

    async def iter_scenes(self, scope: str, *, page_size: int = 50) -> AsyncIterator[JSON]:
        after: str | None = None
        while True:
            page = await self.scenes(scope, limit=page_size, after=after)
            for scene in page["items"]:
                yield scene
            after = page.get("next_cursor")
            if not after:
                return

    async def list_records(self, scope: str, **filters: Any) -> JSON:
        return cast(JSON, await self._run(_Calls.list_records(scope, **filters)))

    async def iter_records(
        self, scope: str, *, page_size: int = 100, **filters: Any
    ) -> AsyncIterator[Record]:
        after: str | None = None
        while True:
            page = await self.list_records(scope, limit=page_size, after=after, **filters)
            for record in page["items"]:
                yield record
            after = page.get("next_cursor")
            if not after:
                return

    async def get_record(self, record_id: str) -> JSON:
        return cast(JSON, await self._run(_Calls.get_record(record_id)))

    async def stage(self, scope: str, operations: list[dict[str, Any]], **fields: Any) -> JSON:
        return cast(JSON, await self._run(_Calls.stage(scope, operations, **fields)))

    async def list_transactions(self, **filters: Any) -> JSON:
        return cast(JSON, await self._run(_Calls.list_transactions(**filters)))

    async def iter_transactions(
        self, *, scope: str | None = None, state: list[str] | None = None, page_size: int = 50
    ) -> AsyncIterator[JSON]:
        after: str | None = None
        while True:
            page = await self.list_transactions(
                scope=scope, state=state, after=after, limit=page_size
            )
            for item in page["items"]:
                yield item
            after = page.get("next_cursor")
            if not after:
                return

    async def get_transaction(self, transaction_id: str) -> JSON:
        return cast(JSON, await self._run(_Calls.get_transaction(transaction_id)))

    async def verify_transaction(self, transaction_id: str) -> JSON:
        return cast(JSON, await self._run(_Calls.verify_transaction(transaction_id)))

    async def verify_audit(self, *, scope: str | None = None) -> JSON:
        return cast(JSON, await self._run(_Calls.verify_audit(scope)))

    async def export_audit(self, *, subject: str | None = None) -> str:
        return cast(str, await self._run(_Calls.export_audit(subject)))

    async def create_checkpoint(self) -> str:
        return cast(str, await self._run(_Calls.create_checkpoint()))

    async def export_subject(self, scope: str, *, reference: str) -> JSON:
        return cast(JSON, await self._run(_Calls.export_subject(scope, reference)))

    async def subject_export(self, job_id: int) -> JSON:
        return cast(JSON, await self._run(_Calls.subject_export(job_id)))

    async def wait_for_subject_export(
        self, job_id: int, *, poll: float = 1.0, timeout: float = 600.0
    ) -> JSON:
        deadline = time.monotonic() + timeout
        while True:
            status = await self.subject_export(job_id)
            if status["status"] != "running" or time.monotonic() >= deadline:
                return status
            await asyncio.sleep(poll)

    async def download_subject_export(self, job_id: int) -> bytes:
        return cast(bytes, await self._run(_Calls.download_subject_export(job_id)))
