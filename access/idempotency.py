"""``Idempotency-Key`` for every write under ``/api/v1/`` (one middleware, no per-endpoint code).

A client that sends ``Idempotency-Key: <key>`` with a POST, PUT, PATCH or
DELETE gets, on a retry with the same key, the first answer (status and
body, plus ``Idempotent-Replayed: true``) and the write runs once:

- the key is bound to the token and to a digest of the method, the path
  (query included) and the body *as a JSON value* (:func:`comparable_body`:
  other whitespace or key order is the same request); the same key with
  another request is 422;
- a row is inserted *before* the write runs; the unique constraint on
  (token, key) is the lock, so of two racing requests (threads, workers,
  machines sharing the database) exactly one executes and the other gets
  409 ``idempotency_key_in_flight`` with ``Retry-After``;
- answers that say "try again" are not kept (401, 429, 5xx): the row is
  removed and a retry executes;
- keys expire ``AETNAWEB_IDEMPOTENCY_TTL_SECONDS`` after first use (24 h by
  default); a key still in flight after ``AETNAWEB_IDEMPOTENCY_IN_FLIGHT_SECONDS``
  (120 s) is taken to belong to a crashed worker and may be run again;
- a kept answer that names a record or episode later purged (a forget, a
  review's reject) is rewritten, inside the purge's transaction, into a 410
  ``idempotency_answer_forgotten`` naming the forgotten IDs
  (:func:`forget_kept_answers`): a replay never returns forgotten content, and
  the write is still not run again.

Requests without the header behave exactly as before.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from access import ratelimits, tokens
from access.models import ApiToken, IdempotencyKey, KeptAnswerName
from aetnaweb import purges
from aetnaweb.api import IDEMPOTENCY_HEADER as HEADER
from aetnaweb.api import IDEMPOTENT_WRITE_METHODS as WRITE_METHODS
from aetnaweb.purges import PurgedContent

# The header and the methods are the kernel's (aetnaweb.api documents them in the
# OpenAPI document); this middleware honours exactly what that document promises.
REPLAYED_HEADER = "Idempotent-Replayed"
# Visible ASCII only: a key is an opaque client token (a UUID, typically), and
# anything else (spaces, NUL, non-ASCII look-alikes) is far likelier a bug.
_KEY_PATTERN = re.compile(r"[\x21-\x7e]{1,255}")
# Answers that mean "this did not happen, try again": never replayed.
_RETRYABLE_STATUSES = frozenset({401, 408, 429})
# What a kept answer becomes once something it named is forgotten: "gone", and
# the request is not run again (running it would store the forgotten words anew).
FORGOTTEN_STATUS = 410
FORGOTTEN_ERROR = "idempotency_answer_forgotten"
# IDs looked up per statement when a purge looks for the answers naming them.
IDS_PER_SEARCH = 500


def _json_error(status: int, error: str, detail: str) -> HttpResponse:
    return HttpResponse(
        json.dumps({"error": error, "field": HEADER, "detail": detail}),
        status=status,
        content_type="application/json",
    )


def comparable_body(body: bytes) -> bytes:
    """The body as a JSON value, spelled one way: what "the same body" means.

    A client that re-serialises its request for a retry (other whitespace,
    other key order, ``\\u00e9`` for ``é``) sends the same request; a
    different value (another string, ``1`` for ``"1"``, ``1.0`` for ``1``)
    is a different one. A body that is not JSON (the API refuses it anyway)
    is compared byte for byte.
    """
    if not body:
        return b""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return b"bytes:" + body
    # ensure_ascii: a lone surrogate (refused later by the API) still encodes.
    return b"json:" + json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")


def request_digest(request: HttpRequest) -> str:
    """SHA-256 over method, full path and the body's JSON value: what "the same request" means."""
    digest = hashlib.sha256()
    digest.update(request.method.encode("ascii") if request.method else b"")
    digest.update(b"\n")
    digest.update(request.get_full_path().encode("utf-8", "surrogatepass"))
    digest.update(b"\n")
    digest.update(comparable_body(request.body))
    return digest.hexdigest()


def _token_for(request: HttpRequest) -> ApiToken | None:
    """The live token the request carries, or None (the API itself then answers 401)."""
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    try:
        return tokens.authenticate(raw.strip())
    except tokens.TokenAuthenticationError:
        return None


def _claim(token: ApiToken, key: str, digest: str) -> IdempotencyKey | None:
    """Insert the in-flight row and return None, or return the row already holding the key."""
    now = timezone.now()
    for _ in range(2):  # a second pass after clearing an expired or abandoned row
        try:
            with transaction.atomic():
                IdempotencyKey.objects.create(
                    token=token,
                    key=key,
                    request_digest=digest,
                    created_at=now,
                    expires_at=now + timedelta(seconds=settings.AETNAWEB_IDEMPOTENCY_TTL_SECONDS),
                )
            return None
        except IntegrityError:
            existing = IdempotencyKey.objects.filter(token=token, key=key).first()
            if existing is None:  # removed between our insert and our read: claim again
                continue
            abandoned = existing.response_status is None and (
                now - existing.created_at
                > timedelta(seconds=settings.AETNAWEB_IDEMPOTENCY_IN_FLIGHT_SECONDS)
            )
            if existing.expires_at > now and not abandoned:
                return existing
            # Conditional on the row we saw, so two retries cannot both take it over.
            if abandoned:
                IdempotencyKey.objects.filter(
                    pk=existing.pk, created_at=existing.created_at, response_status=None
                ).delete()
            else:
                IdempotencyKey.objects.filter(pk=existing.pk, expires_at__lte=now).delete()
    return IdempotencyKey.objects.filter(token=token, key=key).first()


def _replay(
    request: HttpRequest, token: ApiToken, existing: IdempotencyKey, digest: str
) -> HttpResponse:
    if existing.request_digest != digest:
        return _json_error(
            422,
            "idempotency_key_reused",
            "this Idempotency-Key was already used with a different request (method, path or "
            "body); send a new key for a new request",
        )
    if existing.response_status is None:
        response = _json_error(
            409,
            "idempotency_key_in_flight",
            "a request with this Idempotency-Key is still being processed; retry shortly",
        )
        response["Retry-After"] = "1"
        return response
    # A replay is a request too: it counts against the token's rate limit.
    try:
        ratelimits.consume_for(request, token)
    except ratelimits.RateLimited as exc:
        return ratelimits.too_many_requests(exc)
    response = HttpResponse(
        bytes(existing.response_body or b""),
        status=existing.response_status,
        content_type=existing.response_content_type or "application/json",
    )
    response[REPLAYED_HEADER] = "true"
    return response


class IdempotencyMiddleware:
    """Replays the first answer to an API write retried with the same ``Idempotency-Key``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        key = request.headers.get(HEADER)
        if (
            key is None
            or request.method not in WRITE_METHODS
            or not request.path.startswith("/api/v1/")
        ):
            return self.get_response(request)
        if not _KEY_PATTERN.fullmatch(key):
            return _json_error(
                400,
                "invalid_idempotency_key",
                "Idempotency-Key must be 1 to 255 visible ASCII characters (a UUID is a good key)",
            )
        token = _token_for(request)
        if token is None:
            return self.get_response(request)  # the API answers 401; nothing is kept
        digest = request_digest(request)
        existing = _claim(token, key, digest)
        if existing is not None:
            return _replay(request, token, existing, digest)
        try:
            response = self.get_response(request)
        except BaseException:
            IdempotencyKey.objects.filter(token=token, key=key, response_status=None).delete()
            raise
        claimed = IdempotencyKey.objects.filter(token=token, key=key, response_status=None)
        if (
            response.streaming
            or response.status_code >= 500
            or response.status_code in _RETRYABLE_STATUSES
        ):
            claimed.delete()
        else:
            _keep(token, key, response)
        return response


@transaction.atomic
def _keep(token: ApiToken, key: str, response: HttpResponse) -> None:
    """Keep the answer for replays, unless a purge since the claim removed what it names.

    A forget that commits while this request runs rewrites only answers
    already kept; this one was still in flight, so it is checked here, with
    the rows it names locked (:func:`aetnaweb.purges.forgotten_in`).
    """
    row = (
        IdempotencyKey.objects.select_for_update()
        .filter(token=token, key=key, response_status=None)
        .first()
    )
    if row is None:  # taken over as abandoned, or removed: not ours to fill in
        return
    status, content_type = response.status_code, response.get("Content-Type", "")[:100]
    body = response.content
    forgotten = purges.forgotten_in(body, since=row.created_at)
    if forgotten:
        status, content_type, body = (
            FORGOTTEN_STATUS,
            "application/json",
            _forgotten_answer(forgotten),
        )
    IdempotencyKey.objects.filter(pk=row.pk).update(
        response_status=status, response_content_type=content_type, response_body=body
    )
    _index_names(row.pk, body)


def _index_names(pk: int, body: bytes) -> None:
    """Record which IDs the kept answer ``pk`` names: how a purge finds it (by index)."""
    KeptAnswerName.objects.filter(answer_id=pk).delete()
    KeptAnswerName.objects.bulk_create(
        [KeptAnswerName(answer_id=pk, name=name) for name in purges.names_in(body)]
    )


def _forgotten_answer(ids: list[str]) -> bytes:
    return json.dumps(
        {
            "error": FORGOTTEN_ERROR,
            "field": HEADER,
            "detail": "the first answer to this request named memory that has since been "
            "forgotten (a forget or a review's reject), so it is no longer kept. The request "
            "ran once and is not run again; send it under a new key only to store it anew",
            "forgotten_ids": ids,
        }
    ).encode()


def forget_kept_answers(purged: PurgedContent) -> int:
    """Rewrite every kept answer naming a purged record or episode; returns how many.

    Called inside the purge's transaction (:mod:`aetnaweb.purges`). An answer
    that holds forgotten content names its record (remember, recall, a
    preview, a persona: every line carries its ``record_id``) or its episode,
    and each kept answer is indexed by the IDs it names when it is kept
    (:class:`~access.models.KeptAnswerName`, read by the engine's
    :func:`aetnaweb.purges.names_in`), so the purge finds exactly those answers
    by index: its cost follows the answers that name what it purged, not how
    many answers are kept. Expired rows are found too: they are deleted only
    when their key is used again (or by retention), and until then hold the
    bytes. Rows still in flight hold no answer yet (:func:`_keep` checks them).
    """
    ids = list(purged.ids)
    holding: set[int] = set()
    for start in range(0, len(ids), IDS_PER_SEARCH):
        holding.update(
            KeptAnswerName.objects.filter(name__in=ids[start : start + IDS_PER_SEARCH])
            .values_list("answer_id", flat=True)
            .distinct()
        )
    rows = IdempotencyKey.objects.filter(pk__in=holding, response_body__isnull=False)
    rewritten = 0
    for pk, body in rows.values_list("pk", "response_body"):
        stored = bytes(body or b"")
        named = [i for i in ids if i.encode("ascii") in stored]
        answer = _forgotten_answer(named)
        IdempotencyKey.objects.filter(pk=pk).update(
            response_status=FORGOTTEN_STATUS,
            response_content_type="application/json",
            response_body=answer,
        )
        _index_names(pk, answer)  # the rewritten answer names only the forgotten IDs
        rewritten += 1
    return rewritten
