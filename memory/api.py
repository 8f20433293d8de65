"""HTTP endpoints for the memory engine, under ``/api/v1/memory/``.

Each endpoint validates the body (:mod:`memory.api_schemas`), checks the
token's reach (:func:`aetnaweb.api.require`: 404 outside its subtree, 403
without the capability) and calls the same service or selector the
dashboard, the commands and the MCP server call. The audit actor is the
token's label (``agent:<token name>``), set by the services from the principal
(:func:`aetnaweb.access.audit_actor`), so the chain says which credential
acted.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import NinjaAPI, Query, Router, Status

from aetnaweb import access
from aetnaweb.api import (
    ERROR_RESPONSES,
    bad_request,
    may_refuse,
    not_found,
    principal_of,
    refusals_about,
    require,
    require_capability,
)
from aetnaweb.errors import InvalidInput
from aetnaweb.text import displayable
from memory import metadata as record_metadata
from memory import selectors, services
from memory.api_schemas import (
    RECORD_FILTER_PARAMETERS,
    CaptureIn,
    CaptureOut,
    DeletionReceiptOut,
    ForgetBundleOut,
    ForgetIn,
    ForgetPreviewOut,
    LogActionIn,
    LogActionOut,
    PersonaIn,
    PersonaOut,
    ProposeIn,
    ProposeOut,
    RecallBlockIn,
    RecallBlockOut,
    RecallIn,
    RecallOut,
    RecordDetailOut,
    RecordListOut,
    RecordsQuery,
    RememberIn,
    RememberOut,
    ScenesOut,
    ScenesQuery,
)
from memory.errors import (
    ActionLogError,
    CaptureError,
    EpisodeNotFound,
    ExtractionError,
    ForgetPreviewStale,
    ProposalError,
    QueryError,
    RecordNotFound,
    RecordStateError,
    SelectorError,
)
from memory.metadata import MetadataError

router = Router(tags=["memory"])

CONFLICT_RESPONSES = {**ERROR_RESPONSES, 409: ERROR_RESPONSES[400]}


# -- writes ---------------------------------------------------------------------------


@router.post(
    "/remember",
    response={201: RememberOut, 200: RememberOut, **ERROR_RESPONSES},
    summary="Remember a message, a forced note, or an explicit key and value",
)
@may_refuse(ExtractionError, InvalidInput)
def remember(request: HttpRequest, payload: RememberIn) -> Status[dict[str, Any]]:
    """Store a message at exactly ``scope`` (capability ``write``).

    Give ``text`` (a message: facts are extracted; ``<webpage>`` or tool blocks
    land quarantined) or ``key`` and ``value`` (an explicit trusted fact).
    201 when a record was stored; 200 when nothing new was (a duplicate, or
    a message with no fact in it).
    """
    require(request, access.WRITE, payload.scope)
    if payload.text is not None:
        if payload.key is not None or payload.value is not None:
            raise bad_request("give either text, or key and value, not both", field="key")
        with refusals_about("text", ExtractionError="text"):
            result = services.remember(
                scope=payload.scope,
                text=payload.text,
                session_id=payload.session_id,
                turn_id=payload.turn_id,
                source_type=payload.source_type,
                force=payload.force,
                metadata=payload.metadata,
                occurred_at=payload.occurred_at,
                expires_at=payload.expires_at,
                principal=principal_of(request),
            )
        return _created_if_stored(result.as_dict())
    if payload.key is None:
        raise bad_request("this field is required (or give key and value)", field="text")
    if payload.value is None:
        raise bad_request("this field is required with key", field="value")
    with refusals_about("value"):
        result = services.remember_fact(
            scope=payload.scope,
            key=payload.key,
            value=payload.value,
            kind=payload.kind,
            session_id=payload.session_id,
            turn_id=payload.turn_id,
            metadata=payload.metadata,
            expires_at=payload.expires_at,
            principal=principal_of(request),
        )
    return _created_if_stored(result.as_dict())


def _created_if_stored(result: dict[str, Any]) -> Status[dict[str, Any]]:
    return Status(201 if result["records"] else 200, result)


@router.post(
    "/capture",
    response={200: CaptureOut, **ERROR_RESPONSES},
    summary="Capture one turn from an agent host",
)
@may_refuse(CaptureError, ExtractionError, InvalidInput)
def capture(request: HttpRequest, payload: CaptureIn) -> dict[str, Any]:
    """A host's turn hook (capability ``write``): a ``user`` turn is remembered;
    ``assistant``, ``tool_call`` and ``tool_result`` turns leave only a digest and a size."""
    require(request, access.WRITE, payload.scope)
    with refusals_about("content", CaptureError="role"):
        result = services.capture(
            scope=payload.scope,
            role=payload.role,
            content=payload.content,
            session_id=payload.session_id,
            turn_id=payload.turn_id,
            metadata=payload.metadata,
            occurred_at=payload.occurred_at,
            principal=principal_of(request),
        )
    return result.as_dict()


@router.post(
    "/forget/preview",
    response={200: ForgetPreviewOut, **CONFLICT_RESPONSES},
    summary="Preview a forget: exactly what would be purged (writes nothing)",
)
@may_refuse(SelectorError, RecordNotFound, EpisodeNotFound, InvalidInput)
def forget_preview(request: HttpRequest, payload: ForgetIn) -> dict[str, Any]:
    """The records and episodes a forget with this body would purge (capability ``forget``)."""
    require(request, access.FORGET, payload.scope)
    with refusals_about(
        _forget_field(payload), RecordNotFound="record_ids", EpisodeNotFound="episode_ids"
    ):
        preview = services.forget_preview(
            scope=payload.scope,
            selector=payload.selector,
            record_ids=payload.record_ids,
            utterance=payload.utterance,
            episode_ids=payload.episode_ids,
            session_id=payload.session_id,
            include_below=payload.include_below,
            principal=principal_of(request),
        )
    return preview.as_dict()


@router.post(
    "/forget",
    response={200: DeletionReceiptOut | ForgetBundleOut, **CONFLICT_RESPONSES},
    summary="Forget records at one scope (and, asked, the scopes below) and get the receipt",
)
@may_refuse(
    SelectorError,
    RecordNotFound,
    EpisodeNotFound,
    ForgetPreviewStale,
    RecordStateError,
    InvalidInput,
)
def forget(request: HttpRequest, payload: ForgetIn) -> dict[str, Any]:
    """Purge matching records and stored messages at exactly ``scope`` (capability ``forget``).

    Give exactly one of ``selector`` (words the records or messages contain),
    ``record_ids``, ``utterance`` ("forget my backup email"), ``episode_ids``
    or ``session_id``. With ``expected_record_ids`` and ``expected_episode_ids``
    (from a preview) exactly those are purged, or 409 if the match changed.
    Returns an ``aetnamem-deletion-receipt-v1`` listing the purged record and
    episode IDs. With ``include_below`` a selector or utterance also purges its
    matches in the scopes below, and the answer is an
    ``aetnaweb-forget-bundle-v1``: one receipt per scope, bound by a closing
    event (``tools/verify_audit.py --forget-bundle`` checks it offline).
    ``exclude_record_ids`` / ``exclude_episode_ids`` leave previewed rows out.
    Above 10 records and messages, ``confirm_count`` must be that number
    (400 ``forget_count_not_confirmed``, field ``confirm_count``, nothing
    purged). ``reference`` (a ticket number) is kept with the receipts. An
    empty selector is refused (400) and the refusal itself is recorded as
    ``memory.forget_rejected``.
    """
    require(request, access.FORGET, payload.scope)
    with refusals_about(
        _forget_field(payload),
        RecordNotFound="record_ids",
        EpisodeNotFound="episode_ids",
        ForgetPreviewStale="expected_record_ids",
    ):
        return services.forget(
            scope=payload.scope,
            selector=payload.selector,
            record_ids=payload.record_ids,
            utterance=payload.utterance,
            episode_ids=payload.episode_ids,
            session_id=payload.session_id,
            expected_record_ids=payload.expected_record_ids,
            expected_episode_ids=payload.expected_episode_ids,
            include_below=payload.include_below,
            exclude_record_ids=payload.exclude_record_ids,
            exclude_episode_ids=payload.exclude_episode_ids,
            confirm_count=payload.confirm_count,
            reference=payload.reference,
            principal=principal_of(request),
        )


def _forget_field(payload: ForgetIn) -> str:
    for name in ("record_ids", "episode_ids", "session_id", "utterance", "selector"):
        if getattr(payload, name) is not None:
            return name
    return "selector"


@router.post(
    "/propose",
    response={201: ProposeOut, **ERROR_RESPONSES},
    summary="Propose facts for review (they land quarantined)",
)
@may_refuse(ProposalError, InvalidInput)
def propose(request: HttpRequest, payload: ProposeIn) -> Status[dict[str, Any]]:
    """Each fact must cite episode or record IDs of this scope as evidence
    (capability ``propose``); accepted facts wait in quarantine for a person."""
    require(request, access.PROPOSE, payload.scope)
    with refusals_about("facts", ProposalError="facts"):
        result = services.propose_facts(
            scope=payload.scope,
            facts=[fact.model_dump(exclude_none=True) for fact in payload.facts],
            principal=principal_of(request),
        )
    return Status(201, result.as_dict())


@router.post(
    "/log-action",
    response={201: LogActionOut, **ERROR_RESPONSES},
    summary="Append an agent.* event to the scope's audit chain",
)
@may_refuse(ActionLogError, InvalidInput)
def log_action(request: HttpRequest, payload: LogActionIn) -> Status[dict[str, Any]]:
    """Record what the agent did (capability ``write``). The payload goes into the
    audit chain as given: it must hold digests, IDs and counts, never content."""
    require(request, access.WRITE, payload.scope)
    with refusals_about("payload"):
        return Status(
            201,
            services.log_action(
                scope=payload.scope,
                event_type=payload.event_type,
                payload=payload.payload,
                session_id=payload.session_id,
                turn_id=payload.turn_id,
                principal=principal_of(request),
            ),
        )


# -- reads that leave evidence (recall and persona are audited) ----------------------------


@router.post(
    "/recall",
    response={200: RecallOut, **ERROR_RESPONSES},
    summary="Recall the most relevant active memories visible from a scope",
)
@may_refuse(QueryError, MetadataError, InvalidInput)
def recall(request: HttpRequest, payload: RecallIn) -> dict[str, Any]:
    """Top ``limit`` active records at ``scope`` and its ancestors, weighted by distance,
    whose calibrated match ``confidence`` reaches ``min_confidence``; ``abstained`` is true
    (with ``abstain_reason``) when no memory fits (capability ``read``). Every recall is
    logged and audited (the query only as a digest)."""
    require(request, access.READ, payload.scope)
    with refusals_about("query"):
        result = services.recall(
            scope=payload.scope,
            query=payload.query,
            limit=payload.limit,
            min_score=payload.min_score,
            min_confidence=payload.min_confidence,
            session_id=payload.session_id,
            metadata=payload.filters.metadata if payload.filters else None,
            created_at=payload.filters.created_at if payload.filters else None,
            principal=principal_of(request),
        )
    return result.as_dict()


@router.post(
    "/recall-block",
    response={200: RecallBlockOut, **ERROR_RESPONSES},
    summary="A <relevant_memories> block to inject into a prompt",
)
@may_refuse(QueryError, MetadataError, InvalidInput)
def recall_block(request: HttpRequest, payload: RecallBlockIn) -> dict[str, Any]:
    """At most ``max_items`` lines and ``max_chars`` characters of memories whose calibrated
    match confidence reaches ``min_confidence`` (and whose score reaches ``min_score``);
    ``text`` is empty and ``abstained`` true when no memory fits. Capability ``read``."""
    require(request, access.READ, payload.scope)
    with refusals_about("query"):
        block = services.recall_block(
            scope=payload.scope,
            query=payload.query,
            max_items=payload.max_items,
            max_chars=payload.max_chars,
            min_score=payload.min_score,
            min_confidence=payload.min_confidence,
            session_id=payload.session_id,
            metadata=payload.filters.metadata if payload.filters else None,
            created_at=payload.filters.created_at if payload.filters else None,
            principal=principal_of(request),
        )
    return block.as_dict()


@router.post(
    "/persona",
    response={200: PersonaOut, **ERROR_RESPONSES},
    summary="The persona: a bounded text of the active facts visible from a scope",
)
@may_refuse(InvalidInput)
def persona(request: HttpRequest, payload: PersonaIn) -> dict[str, Any]:
    """Keyed facts first (by key), then unkeyed ones newest first, one
    ``- [record_id] content`` line each, cut at ``max_chars``. Audited. Capability ``read``."""
    require(request, access.READ, payload.scope)
    with refusals_about("max_chars"):
        result = services.persona(
            scope=payload.scope,
            max_chars=payload.max_chars,
            principal=principal_of(request),
        )
    return result.as_dict()


# -- plain reads ---------------------------------------------------------------------------


@router.get(
    "/scenes",
    response={200: ScenesOut, **ERROR_RESPONSES},
    summary="Scenes: one per session at exactly a scope, newest first",
)
@may_refuse(InvalidInput)
def scenes(request: HttpRequest, params: Query[ScenesQuery]) -> dict[str, Any]:
    """Each session's episodes and records at ``scope`` (capability ``read``), paginated
    by key: pass ``next_cursor`` back as ``after`` for older sessions."""
    require(request, access.READ, params.scope)
    with refusals_about("limit"):
        result = services.scenes(
            scope=params.scope,
            limit=params.limit,
            after=int(params.after) if params.after is not None else None,
            principal=principal_of(request),
        )
    # A full page may be followed by an empty one; a short page is surely the last.
    return {
        "scope": params.scope,
        "items": (scenes := [scene.as_dict() for scene in result]),
        "scenes": scenes,  # deprecated alias of items
        "next_cursor": result[-1].cursor if len(result) == params.limit else None,
    }


@router.get(
    "/records",
    response={200: RecordListOut, **ERROR_RESPONSES},
    summary="List records stored at a scope, newest first",
    openapi_extra={"parameters": RECORD_FILTER_PARAMETERS},
)
@may_refuse(QueryError, MetadataError, InvalidInput)
def list_records(request: HttpRequest, params: Query[RecordsQuery]) -> dict[str, Any]:
    """Records at exactly ``scope`` (or its subtree with ``include_descendants``), filtered
    and paginated by key: pass ``next_cursor`` as ``after``. Capability ``read``.

    Filters (ANDed, typed; docs/agents.md "Filters"): ``metadata.<key>=<JSON value>``
    (``?metadata.customer_id=42`` the number 42 only, ``?metadata.customer_id=%2242%22``
    the string ``"42"``; a bare word is a 400), ``metadata.<key>.$<op>=<JSON>`` with
    $ne, $in (a JSON array), $gt, $gte, $lt, $lte, and ``created_at.$gte=<ISO 8601>``.
    ``metadata[<key>]``, ``metadata[<key>][$op]`` and ``created_at[$op]`` (the
    deepObject spelling generated clients send) mean the same."""
    require(request, access.READ, params.scope)
    with refusals_about("after"):
        page = selectors.list_records(
            principal_of(request),
            scope=params.scope,
            status=params.status,
            source_type=params.source_type,
            trust_tier=params.trust_tier,
            session_id=params.session_id,
            text=params.text,
            include_descendants=params.include_descendants,
            metadata=_list_filter(request, params),
            after=params.after,
            limit=params.limit,
        )
    return {
        "scope": params.scope,
        "items": [selectors.record_as_dict(record) for record in page.items],
        "next_cursor": page.next_cursor,
    }


def _list_filter(request: HttpRequest, params: RecordsQuery) -> dict[str, Any]:
    """The list's filter, from ``filters`` (JSON) or the metadata/created_at parameters."""
    pairs = [(name, value) for name, values in request.GET.lists() for value in values]
    # A parameter this endpoint does not read is refused, not ignored: a client
    # that flattened metadata[k]=v into k=v would otherwise get an unfiltered list.
    known = set(RecordsQuery.model_fields)
    for name, _ in pairs:
        if name not in known and not name.startswith(record_metadata.QUERY_FAMILIES):
            raise bad_request(
                f"unknown query parameter {displayable(name)[:80]!r}: filter metadata with "
                "metadata.<key> (or metadata[<key>]) parameters, or filters",
                field=displayable(name)[:80],
                error="unknown_field",
            )
    from_parameters = record_metadata.filter_from_query(pairs)
    if params.filters is None:
        return from_parameters
    if from_parameters:
        raise bad_request(
            "give filters or metadata/created_at parameters, not both", field="filters"
        )
    return record_metadata.filter_from_json(params.filters)


@router.get(
    "/records/{record_id}",
    response={200: RecordDetailOut, **ERROR_RESPONSES},
    summary="One record with its supersession chain, source episode, audit events and recalls",
)
@may_refuse()
def get_record(request: HttpRequest, record_id: str) -> dict[str, Any]:
    """A record the token may read (capability ``read``); any other ID is a 404,
    whether it exists elsewhere or not at all."""
    require_capability(request, access.READ)
    if len(record_id) > 64:
        raise not_found()
    try:
        detail = selectors.record_detail(principal_of(request), record_id)
    except RecordNotFound:
        # The path names the record: a 404 like any record the token may not read.
        raise not_found() from None
    return detail.as_dict()


def mount(api: NinjaAPI) -> None:
    # They import this module (its router), so they are added here, once.
    from memory.api_batch import add_routes as add_batch_routes
    from memory.api_conversations import add_routes as add_conversation_routes
    from memory.api_corrections import add_routes as add_correction_routes
    from memory.api_erasure import add_routes as add_erasure_routes
    from memory.api_retention import add_routes as add_retention_routes
    from memory.api_subject_export import add_routes as add_subject_export_routes

    add_batch_routes(router)
    add_conversation_routes(router)
    add_correction_routes(router)
    add_erasure_routes(router)
    add_retention_routes(router)
    add_subject_export_routes(router)
    api.add_router("/memory/", router)
