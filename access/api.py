"""The access app's part of the HTTP API: who a bearer token is, and ``GET /api/v1/token``.

:func:`mount` (called by ``aetnaweb/api_urls.py``, where the URLs are built)
installs :func:`authenticate_bearer` as the kernel bearer's authenticator,
maps this app's refusals to the API's JSON shape (401 for a bad token, 429
with ``Retry-After`` for a spent rate limit) and adds the ``/token`` endpoint.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Router, Schema

from access import ratelimits, tokens
from access.models import ApiToken
from aetnaweb.api import ERROR_RESPONSES, error_response, install_token_authenticator, may_refuse

router = Router(tags=["token"])


def authenticate_bearer(request: HttpRequest, raw: str) -> ApiToken:
    """The live token for ``raw``, counted against its rate limit (401 or 429 otherwise).

    The count is noted on ``request``, so the answer carries the ``RateLimit-*`` fields.
    """
    api_token = tokens.authenticate(raw)
    ratelimits.consume_for(request, api_token)  # 429 before any work (access/ratelimits.py)
    return api_token


def _token_error(request: HttpRequest, exc: tokens.TokenAuthenticationError) -> HttpResponse:
    return error_response(request, 401, "unauthorized", str(exc))


def _rate_limited(request: HttpRequest, exc: ratelimits.RateLimited) -> HttpResponse:
    return ratelimits.too_many_requests(exc)


class TokenOut(Schema):
    name: str
    token_prefix: str
    scope: str
    capabilities: list[str]
    expires_at: str


@router.get(
    "/token",
    response={200: TokenOut, **ERROR_RESPONSES},
    summary="Describe the calling token",
)
@may_refuse()
def whoami(request: HttpRequest) -> dict[str, Any]:
    """The calling token's scope subtree, capabilities and expiry (never its secret)."""
    token: ApiToken = request.auth  # type: ignore[attr-defined]
    return {
        "name": token.name,
        "token_prefix": token.token_prefix,
        "scope": token.scope,
        "capabilities": sorted(token.capabilities),
        "expires_at": token.expires_at.isoformat(),
    }


def mount(api: NinjaAPI) -> None:
    install_token_authenticator(authenticate_bearer)
    # ninja annotates a handler's argument as "the exception or its class"; it passes the instance.
    api.add_exception_handler(tokens.TokenAuthenticationError, _token_error)  # type: ignore[arg-type]
    api.add_exception_handler(ratelimits.RateLimited, _rate_limited)  # type: ignore[arg-type]
    api.add_router("", router)
