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


class ServerError(ApiError):
    """5xx: the server failed or is unavailable."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
}


def error_for(status: int, body: Any) -> ApiError:
    """The typed exception for a non-2xx answer (the body as parsed JSON, or text)."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        code, detail, field = body["error"], str(body.get("detail", "")), body.get("field")
    else:
        code, detail, field = "http_error", str(body)[:500], None
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    return cls(status, code, detail, field if isinstance(field, str) else None)
