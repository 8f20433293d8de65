"""Typed exceptions for the API's refusals: ``{"error": code, "field": name, "detail": text}``."""

from __future__ import annotations

from typing import Any


class AetnawebError(Exception):
    """Base of every error this client raises."""


class TransportError(AetnawebError):
    """The server could not be reached, or answered something that is not the API."""


class ApiError(AetnawebError):
    """A refusal from the API: ``status``, the JSON ``code``, the ``field`` at fault, ``detail``."""

    def __init__(self, status: int, code: str, detail: str, field: str | None = None) -> None:
        where = f" ({field})" if field else ""
        super().__init__(f"{status} {code}{where}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.field = field


class BadRequest(ApiError):
    """400: bad input (``field`` names it) or a domain refusal; nothing was written."""


class Unauthorized(ApiError):
    """401: the token is missing, malformed, unknown, revoked or expired."""


class Forbidden(ApiError):
    """403: the token reaches the scope but lacks the capability."""


class NotFound(ApiError):
    """404: outside the token's subtree, or does not exist (the API never says which)."""


class Conflict(ApiError):
    """409: the records are not in the state the request assumed (e.g. a stale forget preview)."""


class Gone(ApiError):
    """410: what was asked for existed and is no longer kept (e.g. ``subject_export_expired``:
    start a new export)."""


class RateLimited(ApiError):
    """429: the token's requests for this window are used up; nothing was done.

    ``retry_after`` is the server's ``Retry-After`` in seconds (None if it sent none).
    The client has already waited and retried ``rate_limit_retries`` times when it raises.
    """

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        field: str | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(status, code, detail, field)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx: the server failed or is unavailable."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
}


def retry_after_of(value: str | None) -> float | None:
    """``Retry-After`` as seconds (the API sends a number); None when absent or not a number."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None


def error_for(status: int, body: Any, retry_after: str | None = None) -> ApiError:
    """The typed exception for a non-2xx answer (the body as parsed JSON, or text)."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        code, detail, field = body["error"], str(body.get("detail", "")), body.get("field")
    else:
        code, detail, field = "http_error", str(body)[:500], None
    field = field if isinstance(field, str) else None
    if status == 429:
        return RateLimited(status, code, detail, field, retry_after=retry_after_of(retry_after))
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    return cls(status, code, detail, field)
