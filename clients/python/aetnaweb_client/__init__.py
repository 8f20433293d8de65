"""aetnaweb-client: typed sync and async clients for the aetnaweb HTTP API (``/api/v1``)."""

from __future__ import annotations

from aetnaweb_client.client import AsyncClient, Client
from aetnaweb_client.errors import (
    AetnawebError,
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    RateLimited,
    ServerError,
    TransportError,
    Unauthorized,
)

__all__ = [
    "AetnawebError",
    "ApiError",
    "AsyncClient",
    "BadRequest",
    "Client",
    "Conflict",
    "Forbidden",
    "Gone",
    "NotFound",
    "RateLimited",
    "ServerError",
    "TransportError",
    "Unauthorized",
]
