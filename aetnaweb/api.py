"""The agent-facing HTTP JSON API, mounted at ``/api/v1/`` (OpenAPI at ``/api/v1/openapi.json``).

Agents authenticate with ``Authorization: Bearer aetna_...``; there are no
cookies, so there is no CSRF and no login redirect. This module is kernel and
imports no app: the bearer here reads the header and refuses what is not a
bearer token, and the ``access`` app (which owns tokens) installs who the
token is when ``aetnaweb/api_urls.py`` mounts it (:func:`install_token_authenticator`). Each app
contributes a router (``memory/api.py``, ``actions/api.py``, ``audit/api.py``)
whose endpoints parse the request, check the token's reach and call the same
service or selector the dashboard and the commands call: one write path.

Every refusal is JSON of one shape, ``{"error": code, "field": name-or-null,
"detail": message}``:

- 400: a body or parameter that does not validate (the field and the reason),
  a body that is not a JSON object, a body over 64 KiB, an unknown record, a
  domain refusal from a service;
- 401: a missing, malformed, unknown, revoked or expired token;
- 403: a token that reaches the scope but lacks the capability (its own
  subtree, so nothing leaks by saying so);
- 404: anything outside the token's subtree, exactly like something that does
  not exist.

Bad input never produces a 500 and never writes anything: validation happens
before a service is called, and services refuse inside their transaction.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http import HTTPStatus
from typing import Annotated, Any, NoReturn

from django.contrib.auth.decorators import login_not_required
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import resolve
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer
from pydantic import AfterValidator, ConfigDict, Field

from aetnaweb import access
from aetnaweb.access import Principal, TokenRow
from aetnaweb.errors import DomainError, documented_codes
from aetnaweb.faults import RETRY_AFTER_SECONDS, database_fault
from aetnaweb.limits import MAX_BODY_BYTES, MAX_CONTEXT_CHARS
from aetnaweb.scopes import Scope
from aetnaweb.text import displayable, unstorable_text_in

logger = logging.getLogger("aetnaweb.api")

API_PREFIX = "/api/v1/"


# -- errors --------------------------------------------------------------------


class ApiError(Exception):
    """A refusal the API reports as ``{"error", "field", "detail"}`` with ``status``."""

    def __init__(self, status: int, error: str, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.error = error
        self.detail = detail
        self.field = field


def bad_request(
    detail: str, *, field: str | None = None, error: str = "invalid_request"
) -> ApiError:
    return ApiError(400, error, detail, field)


def not_found() -> ApiError:
    # One message for "does not exist" and "not yours": existence never leaks.
    return ApiError(404, "not_found", "no such resource for this token")


def _canonical_scope(raw: str) -> str:
    return str(Scope.parse(raw))  # ScopeError is a ValueError: a 400 naming the field


ScopeStr = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="A scope 'tenant:user:project' (see scopes.md), e.g. 'acme:alice:proj'.",
        examples=["acme:alice:proj"],
    ),
    AfterValidator(_canonical_scope),
]
"""A scope in a body or query: validated by :meth:`Scope.parse`, never repaired."""

ContextStr = Annotated[str, Field(min_length=1, max_length=MAX_CONTEXT_CHARS)]
"""A session or turn ID."""


class BodyIn(Schema):
    """Base of every JSON request body and of every object nested in one.

    A field the endpoint does not take is refused (400 ``unknown_field``
    naming it) rather than ignored: ``top_k`` instead of ``limit`` must not
    quietly run with the default. The served document says so per schema
    (``additionalProperties: false``); tests/api/test_openapi.py checks that
    every request body is built on this base.
    """

    model_config = ConfigDict(extra="forbid")


# The codes the transport itself answers with (parsing, tokens, limits, bugs), by
# status. Domain refusals document themselves: each DomainError class declares
# its code, status and meaning (aetnaweb/errors.py) and ERROR_CODES merges them.
TRANSPORT_CODES: dict[int, dict[str, str]] = {
    400: {
        "invalid_request": "the request is malformed (e.g. a bad Content-Length)",
        "invalid_json": "the body is not a JSON object",
        "body_too_large": "the body is over 64 KiB",
        "invalid_field": "a field does not validate (see field and detail)",
        "missing_field": "a required field is missing",
        "unknown_field": "the body holds a field this endpoint does not take (field names it)",
        "invalid_scope": "a scope does not parse (see scopes.md)",
        "invalid_idempotency_key": "Idempotency-Key is not 1 to 255 visible ASCII characters",
    },
    401: {"unauthorized": "missing, malformed, unknown, revoked or expired token"},
    403: {"capability_missing": "the token reaches the scope but lacks the capability"},
    404: {"not_found": "outside the token's subtree, or does not exist (never says which)"},
    405: {"http_error": "another HTTP-level refusal, e.g. a method the endpoint does not take"},
    410: {
        "idempotency_answer_forgotten": "the first answer to this Idempotency-Key named memory"
        " since forgotten; it is not kept and the request is not run again"
    },
    409: {
        "idempotency_key_in_flight": "a request with this Idempotency-Key is still running;"
        " retry after Retry-After"
    },
    422: {
        "idempotency_key_reused": "this Idempotency-Key was used with a different request;"
        " send a new key"
    },
    429: {"rate_limited": "the token's requests per minute are used up; retry after Retry-After"},
    500: {"internal_error": "a server bug; logged, reported without detail"},
    503: {
        "service_unavailable": "the database is unavailable (see detail); retry after Retry-After"
    },
}


class _ErrorCatalogue(Mapping[int, dict[str, str]]):
    """Every code a refusal may carry, by status, with what it means (read live).

    The schema lists them (ErrorOut's ``x-error-codes`` and each response's
    description) so a client can branch on them; ``error`` stays a plain string
    so a code added later never breaks an older client's parsing. The domain
    part comes from the error classes, so it cannot drift from what the
    handler sends; tests/api/test_openapi.py checks the list is complete.
    """

    def _merged(self) -> dict[int, dict[str, str]]:
        merged = {status: dict(codes) for status, codes in TRANSPORT_CODES.items()}
        for status, codes in documented_codes().items():
            merged.setdefault(status, {}).update(codes)
        return merged

    def __getitem__(self, status: int) -> dict[str, str]:
        return self._merged()[status]

    def __iter__(self) -> Iterator[int]:
        return iter(self._merged())

    def __len__(self) -> int:
        return len(self._merged())


ERROR_CODES: Mapping[int, dict[str, str]] = _ErrorCatalogue()


def document_error_codes(status: int, codes: dict[str, str]) -> None:
    """Add an endpoint's own transport codes (not a DomainError's) to the documented list."""
    TRANSPORT_CODES.setdefault(status, {}).update(codes)


REFUSALS_ATTRIBUTE = "declared_refusals"
"""Where :func:`may_refuse` keeps an endpoint function's declaration."""


def may_refuse[View: Callable[..., Any]](
    *errors: type[DomainError] | str,
) -> Callable[[View], View]:
    """Declare what an endpoint's own code may refuse with: error classes or transport codes.

    A class stands for itself and its subclasses (their codes and extra codes).
    The served document then lists, on each error response of the operation,
    only these codes and those every request may meet (a malformed body, a
    scope that does not parse, a bad token...), never the whole catalogue.
    ``may_refuse()`` with nothing says the endpoint refuses only bad input;
    tests/api/test_openapi.py checks every operation declares its refusals.
    """

    def declare(view: View) -> View:
        setattr(view, REFUSALS_ATTRIBUTE, (*getattr(view, REFUSALS_ATTRIBUTE, ()), *errors))
        return view

    return declare


def _codes_of(error: type[DomainError] | str) -> dict[int, set[str]]:
    if isinstance(error, str):  # a transport code; resolved late, endpoints add some at mount
        statuses = [status for status, codes in ERROR_CODES.items() if error in codes]
        if not statuses:
            raise ValueError(f"{error!r} is not a documented error code")
        return {status: {error} for status in statuses}
    found: dict[int, set[str]] = {}
    for cls in (error, *_subclasses(error)):
        if cls.status == 404:  # answers not_found, which every operation lists
            continue
        found.setdefault(cls.status, set()).update((cls.code, *cls.extra_codes))
    return found


def _subclasses(cls: type[DomainError]) -> list[type[DomainError]]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_subclasses(direct))]


@contextmanager
def refusals_about(field: str | None = None, **by_class: str) -> Iterator[None]:
    """A domain refusal raised inside that names no field is about ``field``.

    Status and code come from the error's class (the one handler below);
    this only says which request field an endpoint's refusals concern, e.g.
    ``refusals_about("text", RecordNotFound="record_ids")`` (keys are class names).
    """
    try:
        yield
    except DomainError as exc:
        if exc.field is None:
            exc.field = by_class.get(type(exc).__name__, field)
        raise


class ErrorOut(Schema):
    """Every refusal: a short code, the field at fault (if any) and a sentence."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": "invalid_scope",
                    "field": "scope",
                    "detail": "a scope has exactly three segments",
                }
            ]
        }
    )

    error: str = Field(description="A stable, machine-readable code; see x-error-codes.")
    field: str | None = Field(
        None, description="The request field at fault, dotted (facts.0.content), or null."
    )
    detail: str = Field(description="A sentence a person can act on.")


ERROR_RESPONSES: dict[int, type[Schema]] = {
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
}


# -- request parsing -------------------------------------------------------------


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


class StrictJSONParser(Parser):
    """JSON bodies only: at most 64 KiB, an object at the top, no NaN or Infinity."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        check_body_size(request)
        try:
            data = json.loads(request.body, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            raise bad_request(
                f"the body is not valid JSON: {exc}", field="body", error="invalid_json"
            ) from exc
        if not isinstance(data, dict):
            raise bad_request("the body must be a JSON object", field="body", error="invalid_json")
        # NUL (PostgreSQL refuses it) and lone surrogates (UTF-8 cannot encode
        # them; JSON can spell one as \ud800) are bad input, never a 500 later.
        found = unstorable_text_in(data)
        if found is not None:
            raise _text_refusal(found[0] or "body", found[1])
        return data


def _text_refusal(field: str, reason: str) -> ApiError:
    return bad_request(reason, field=field, error="invalid_field")


def check_url_text(request: HttpRequest) -> None:
    """Refuse unstorable text in the path and the query string (names the parameter)."""
    found = unstorable_text_in(request.path)
    if found is not None:
        raise _text_refusal("path", found[1])
    for name, values in request.GET.lists():
        found = unstorable_text_in([name, *values])
        if found is not None:
            raise _text_refusal(displayable(name.replace("\x00", "")) or "query", found[1])


def check_body_size(request: HttpRequest) -> None:
    """Refuse a body over :data:`MAX_BODY_BYTES` before reading it when the length is declared."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    try:
        length = int(declared)
    except ValueError:
        raise bad_request(
            "the Content-Length header is not a number", field="body", error="invalid_request"
        ) from None
    if length > MAX_BODY_BYTES or len(request.body) > MAX_BODY_BYTES:
        raise bad_request(
            f"the body is larger than {MAX_BODY_BYTES} bytes (64 KiB)",
            field="body",
            error="body_too_large",
        )


# -- authentication ------------------------------------------------------------------


TokenAuthenticator = Callable[[HttpRequest, str], TokenRow]
"""(request, raw bearer token) -> its live token row; raises to refuse (the installer maps
its errors). It gets the request so what it learns (the rate-limit count) can reach the answer."""


def unauthorized(detail: str) -> ApiError:
    return ApiError(401, "unauthorized", detail)


class TokenBearer(HttpBearer):
    """``Authorization: Bearer aetna_...``; the request then carries ``principal``.

    Who a token is comes from :attr:`authenticator`, installed by the app that
    owns tokens (``access.api.mount``). Until one is installed every request is
    refused: the API fails closed, never open.
    """

    def __init__(self) -> None:
        super().__init__()
        self.authenticator: TokenAuthenticator | None = None

    def __call__(self, request: HttpRequest) -> TokenRow:
        header = request.headers.get(self.header, "")
        scheme, _, raw = header.partition(" ")
        if not header:
            raise unauthorized("missing API token: send 'Authorization: Bearer <token>'")
        if scheme.lower() != "bearer" or not raw.strip():
            raise unauthorized("malformed Authorization header: expected 'Bearer <token>'")
        return self.authenticate(request, raw.strip())

    def authenticate(self, request: HttpRequest, token: str) -> TokenRow:
        if self.authenticator is None:
            raise unauthorized("token authentication is not configured on this server")
        # The authenticator also counts the request against the token's rate
        # limit: 429 before any work.
        api_token = self.authenticator(request, token)
        request.principal = access.token_principal(api_token)  # type: ignore[attr-defined]
        # Checked here, after authentication, so an anonymous caller learns
        # only "401" and an agent learns its body is too large before any
        # endpoint looks at it (endpoints without a body included).
        check_body_size(request)
        check_url_text(request)
        return api_token


def principal_of(request: HttpRequest) -> Principal:
    return request.principal  # type: ignore[attr-defined, no-any-return]


def require(request: HttpRequest, capability: str, scope: Scope | str) -> Scope:
    """The token's reach, checked before a service is called (the service checks again).

    Outside the token's subtree: 404. Inside it without the capability: 403,
    naming the capability, since the token's own subtree is no secret to it.
    """
    principal = principal_of(request)
    parsed = Scope.parse(scope)
    if access.may(principal, capability, parsed):
        return parsed
    if any(granted.covers(parsed) for granted, _ in principal.bindings):
        raise ApiError(
            403,
            "capability_missing",
            f"this token does not hold the {capability!r} capability",
        )
    raise not_found()


def require_capability(request: HttpRequest, capability: str) -> None:
    """For endpoints whose object is found first (a record ID): the capability alone."""
    if not access.has_capability_anywhere(principal_of(request), capability):
        raise ApiError(
            403,
            "capability_missing",
            f"this token does not hold the {capability!r} capability",
        )


# -- the API ---------------------------------------------------------------------------


class AetnaAPI(NinjaAPI):
    """Ninja with an OpenAPI document a client generator accepts (tests/api/test_openapi.py)."""

    def get_openapi_operation_id(self, operation: Any) -> str:
        # Plain names (remember, list_records): generated clients get readable methods.
        # An endpoint may set operation_id itself where its function name is ambiguous.
        return str(operation.view_func.__name__)

    def _declared_refusals(self) -> dict[str, tuple[type[DomainError] | str, ...]]:
        """operationId -> what :func:`may_refuse` declared on its function."""
        declared = {}
        for _prefix, router in self._routers:
            for path_view in router.path_operations.values():
                for operation in path_view.operations:
                    refusals = getattr(operation.view_func, REFUSALS_ATTRIBUTE, None)
                    if refusals is not None:
                        operation_id = operation.operation_id or self.get_openapi_operation_id(
                            operation
                        )
                        declared[operation_id] = refusals
        return declared

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(*args, **kwargs)
        components = schema.get("components", {}).get("schemas", {})
        declared = self._declared_refusals()
        for operations in schema.get("paths", {}).values():
            for method, operation in operations.items():
                refusals = declared.get(str(operation.get("operationId")))
                _repair_operation(operation, _body_fields(operation, components), refusals)
                _describe_guards(method, operation)
        error_out = schema.get("components", {}).get("schemas", {}).get("ErrorOut")
        if error_out is not None:
            error_out["x-error-codes"] = {
                str(status): dict(sorted(codes.items()))
                for status, codes in sorted(ERROR_CODES.items())
            }
        return schema


def _body_fields(operation: dict[str, Any], components: dict[str, Any]) -> set[str]:
    """The top-level field names of an operation's JSON body (empty without one)."""
    content = operation.get("requestBody", {}).get("content", {})
    schema = content.get("application/json", {}).get("schema", {})
    ref = schema.get("$ref", "")
    if ref.startswith("#/components/schemas/"):
        schema = components.get(ref.rsplit("/", 1)[-1], {})
    return set(schema.get("properties", {}))


def _repair_operation(
    operation: dict[str, Any],
    body_fields: set[str],
    refusals: tuple[type[DomainError] | str, ...] | None,
) -> None:
    # Ninja keys responses by int, an endpoint's openapi_extra by str: one key per
    # status in the served JSON (the explicit extra wins, it describes the body).
    responses = operation.get("responses", {})
    merged: dict[str, Any] = {}
    for status in [key for key in responses if not isinstance(key, str)] + [
        key for key in responses if isinstance(key, str)
    ]:
        merged[str(status)] = responses[status]
    operation["responses"] = merged
    for parameter in operation.get("parameters", []):
        # Pydantic puts JSON Schema's list-shaped `examples` on the parameter; OpenAPI
        # 3.1 wants a map of Example Objects there (the list stays in its schema).
        examples = parameter.get("examples")
        if isinstance(examples, list):
            parameter["examples"] = {
                f"example{index}": {"value": value} for index, value in enumerate(examples, 1)
            }
    listed_codes = _operation_codes(operation, body_fields, refusals)
    for error in refusals or ():
        for status in _codes_of(error):
            # A declared refusal's status gets a response even where ninja listed none.
            operation["responses"].setdefault(
                str(status), {"description": HTTPStatus(status).phrase, "content": _ERROR_CONTENT}
            )
    for status, response in operation.get("responses", {}).items():
        codes = listed_codes.get(int(status), {}) if str(status).isdigit() else {}
        if codes and int(status) >= 400:
            listed = "; ".join(f"`{code}`: {meaning}" for code, meaning in sorted(codes.items()))
            response["description"] = f"{response.get('description', 'Error')}. Codes: {listed}"


def _operation_codes(
    operation: dict[str, Any],
    body_fields: set[str],
    declared: tuple[type[DomainError] | str, ...] | None,
) -> dict[int, dict[str, str]]:
    """The codes one operation may answer with, by status, with their meanings.

    What every request may meet (the token, the body's size, text that cannot
    be stored, a parameter that does not validate) plus what the request's
    shape allows (a body: invalid JSON, unknown fields; a scope) plus the
    endpoint's own declared refusals. An operation that declared nothing
    lists the whole catalogue, which is true if unhelpful (a test forbids it).
    """
    if declared is None:
        return dict(ERROR_CODES.items())
    wanted: dict[int, set[str]] = {
        400: {"invalid_request", "body_too_large", "invalid_field"},
        401: {"unauthorized"},
        403: {"capability_missing"},
        404: {"not_found"},
        503: {"service_unavailable"},
    }
    parameters = operation.get("parameters", [])
    if operation.get("requestBody"):
        wanted[400] |= {"invalid_json", "unknown_field", "missing_field"}
    # A path parameter is never missing: without it the route does not match.
    if any(p.get("required") and p.get("in") != "path" for p in parameters):
        wanted[400].add("missing_field")
    if "scope" in body_fields or any(parameter.get("name") == "scope" for parameter in parameters):
        wanted[400].add("invalid_scope")
    for error in declared:
        for status, codes in _codes_of(error).items():
            wanted.setdefault(status, set()).update(codes)
    return {
        status: {code: ERROR_CODES[status][code] for code in codes if code in ERROR_CODES[status]}
        for status, codes in wanted.items()
        if status in ERROR_CODES
    }


# The refusals that happen before an endpoint runs (access/ratelimits.py in
# the token check, access/idempotency.py as middleware on every write) are in
# no endpoint's code, so the schema adds them to each operation they guard:
# a generated client then knows which calls take Idempotency-Key and which may
# answer 429. Codes named here are the only ones listed on these responses.
# The kernel imports no app, so it names the middleware's header and methods
# itself; tests/api/test_openapi.py checks they are access.idempotency's.
IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENT_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_RATE_LIMIT_CODES = ("rate_limited",)
_IDEMPOTENCY_CODES: dict[int, tuple[str, ...]] = {
    409: ("idempotency_key_in_flight",),
    410: ("idempotency_answer_forgotten",),
    422: ("idempotency_key_reused",),
}
_RETRY_AFTER_HEADER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "integer", "minimum": 0},
    }
}
# Every answer to a counted token carries the draft's separate fields
# (access/ratelimits.py); an unlimited token's answers carry none, hence "may".
_RATE_LIMIT_HEADERS = {
    "RateLimit-Limit": {
        "description": "Requests this token may make per window (absent when unlimited).",
        "schema": {"type": "integer", "minimum": 1},
    },
    "RateLimit-Remaining": {
        "description": "Requests left in the current window.",
        "schema": {"type": "integer", "minimum": 0},
    },
    "RateLimit-Reset": {
        "description": "Seconds until the current window ends.",
        "schema": {"type": "integer", "minimum": 0},
    },
}
_ERROR_CONTENT = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}


def _codes_text(status: int, codes: tuple[str, ...]) -> str:
    return "; ".join(f"`{code}`: {ERROR_CODES[status][code]}" for code in codes)


def _add_refusal(
    operation: dict[str, Any], status: int, codes: tuple[str, ...], *, retry_after: bool
) -> None:
    responses = operation.setdefault("responses", {})
    response = responses.get(str(status))
    if response is None:
        reason = {
            400: "Bad request",
            409: "Conflict",
            410: "Gone",
            422: "Unprocessable request",
            429: "Too many requests",
        }
        response = responses[str(status)] = {
            "description": f"{reason[status]}. Codes: {_codes_text(status, codes)}",
            "content": _ERROR_CONTENT,
        }
    else:
        # The endpoint's own refusals of this status already listed every code
        # (_repair_operation); make sure these are among them.
        missing = [code for code in codes if f"`{code}`" not in response.get("description", "")]
        if missing:
            response["description"] += f"; {_codes_text(status, tuple(missing))}"
    if retry_after:
        response.setdefault("headers", {}).update(_RETRY_AFTER_HEADER)


def _describe_guards(method: str, operation: dict[str, Any]) -> None:
    if operation.get("security"):
        _add_refusal(operation, 429, _RATE_LIMIT_CODES, retry_after=True)
        for status, response in operation["responses"].items():
            if status != "401":  # a refused token was never counted
                response.setdefault("headers", {}).update(_RATE_LIMIT_HEADERS)
    if method.upper() not in IDEMPOTENT_WRITE_METHODS:
        return
    parameters = operation.setdefault("parameters", [])
    if not any(p.get("in") == "header" and p.get("name") == IDEMPOTENCY_HEADER for p in parameters):
        parameters.append(
            {
                "name": IDEMPOTENCY_HEADER,
                "in": "header",
                "required": False,
                "description": (
                    "Makes a retry safe: the same key with the same request returns the "
                    "first answer (with Idempotent-Replayed: true) and writes once. 1 to 255 "
                    "visible ASCII characters, e.g. a UUID; kept for "
                    "AETNAWEB_IDEMPOTENCY_TTL_SECONDS (24 h by default)."
                ),
                "schema": {"type": "string", "minLength": 1, "maxLength": 255},
                "examples": {"uuid": {"value": "5f0c6a0e-8d2b-4a57-9a53-3f3f0e8b7c11"}},
            }
        )
    _add_refusal(operation, 400, ("invalid_idempotency_key",), retry_after=False)
    _add_refusal(operation, 409, _IDEMPOTENCY_CODES[409], retry_after=True)
    _add_refusal(operation, 410, _IDEMPOTENCY_CODES[410], retry_after=False)
    _add_refusal(operation, 422, _IDEMPOTENCY_CODES[422], retry_after=False)


token_bearer = TokenBearer()


def install_token_authenticator(authenticator: TokenAuthenticator) -> None:
    """Say who a bearer token is (called once, by the tokens' app when it is mounted)."""
    token_bearer.authenticator = authenticator


api = AetnaAPI(
    title="aetnaweb API",
    version="1",
    description=(
        "Scoped agent memory, guarded actions and audit evidence for agents. "
        "Authenticate with 'Authorization: Bearer <token>' (create a token in the "
        "dashboard under Access > API tokens, or with 'manage.py access token create'). "
        "Every refusal is JSON {error, field, detail}: 400 bad input (naming the field), "
        "401 bad token, 403 missing capability, 404 outside the token's scope subtree."
    ),
    urls_namespace="api",
    auth=token_bearer,
    parser=StrictJSONParser(),
    openapi_url="/openapi.json",
    docs_url=None,  # no Swagger page: it would load scripts from a CDN
    docs_decorator=login_not_required,
)


def error_response(
    request: HttpRequest, status: int, error: str, detail: str, field: str | None = None
) -> HttpResponse:
    response = api.create_response(
        request, {"error": error, "field": field, "detail": detail}, status=status
    )
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="aetnaweb"'
    return response


def _field_of(loc: list[Any] | tuple[Any, ...]) -> str | None:
    """``["body", "payload", "facts", 0, "content"]`` -> ``facts.0.content``."""
    parts = [str(part) for part in loc]
    if parts and parts[0] in {"body", "query", "path", "header", "cookie", "form"}:
        parts = parts[1:]
        # Bodies and query schemas arrive under the endpoint's parameter name.
        if len(parts) > 1 and parts[0] in {"payload", "params", "filters"}:
            parts = parts[1:]
    return ".".join(parts) or None


@api.exception_handler(ApiError)
def _api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return error_response(request, exc.status, exc.error, exc.detail, exc.field)


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    # A misspelt field is both unknown and (its real name) missing: name the one sent.
    unknown = [error for error in exc.errors if error.get("type") == "extra_forbidden"]
    first = unknown[0] if unknown else exc.errors[0] if exc.errors else {}
    field = _field_of(first.get("loc", ()))
    reason = str(first.get("msg", "invalid value"))
    reason = reason.removeprefix("Value error, ")
    error = "invalid_field"
    if first.get("type") == "missing":
        reason, error = "this field is required", "missing_field"
    elif first.get("type") == "extra_forbidden":
        name = field.rsplit(".", 1)[-1] if field else "?"
        reason = (
            f"unknown field {displayable(name)[:80]!r}: this endpoint does not take it "
            "(its fields are in /api/v1/openapi.json)"
        )
        error = "unknown_field"
    elif field is not None and field.rsplit(".", 1)[-1] == "scope":
        error = "invalid_scope"
    return error_response(request, 400, error, reason, field)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc.__cause__, ApiError):  # a parser refusal wrapped by ninja
        return _api_error(request, exc.__cause__)
    if isinstance(exc, AuthenticationError):
        return error_response(request, 401, "unauthorized", "missing or invalid API token")
    if exc.status_code == 400:
        return error_response(request, 400, "invalid_json", str(exc), "body")
    return error_response(request, exc.status_code, "http_error", str(exc))


@api.exception_handler(DomainError)
def _domain_error(request: HttpRequest, exc: DomainError) -> HttpResponse:
    """Every refusal of the engine: its class's status and code, its field, its sentence."""
    if exc.status == 404:
        # Not found and not yours read the same: no detail that could leak existence.
        return _api_error(request, not_found())
    return error_response(request, exc.status, exc.error_code, exc.detail, exc.field)


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return _api_error(request, not_found())


@api.exception_handler(DatabaseError)
def _database_error(request: HttpRequest, exc: DatabaseError) -> HttpResponse:
    fault = database_fault(exc)
    if fault is None:  # an IntegrityError or a bad query: a bug
        return _unexpected(request, exc)
    logger.error("database fault in %s %s: %s", request.method, request.path, exc)
    response = error_response(request, 503, "service_unavailable", fault)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    # A bug, never bad input: logged with its traceback, reported without detail.
    logger.exception("unexpected error in %s %s", request.method, request.path)
    return error_response(
        request, 500, "internal_error", "the server failed; the error has been logged"
    )


# -- the JSON 404 for paths no router answers -------------------------------------------


@csrf_exempt  # it writes nothing; a POST to a wrong path is a JSON 404, not a CSRF page
@login_not_required
def unknown_endpoint(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any other path under ``/api/v1/``: a JSON 404 (agents never get an HTML page)."""
    detail = "no such endpoint; the endpoints are listed in /api/v1/openapi.json"
    if not request.path.endswith("/"):
        try:
            match = resolve(f"{request.path}/")
        except Http404:
            match = None
        if match is not None and match.func is not unknown_endpoint:
            detail = f"no such endpoint; did you mean {request.path}/ ?"
    return HttpResponse(
        json.dumps({"error": "not_found", "field": None, "detail": detail}),
        status=404,
        content_type="application/json",
    )


# -- every error under /api/v1/ is JSON ------------------------------------------------------

_PLAIN_ERRORS: dict[int, tuple[str, str]] = {
    403: (
        "forbidden",
        "refused before reaching the API (a cookie-authenticated request without a CSRF"
        " token): agents send only 'Authorization: Bearer <token>'",
    ),
    404: ("not_found", "no such endpoint; the endpoints are listed in /api/v1/openapi.json"),
    405: ("method_not_allowed", "this endpoint does not accept {method}"),
    500: ("internal_error", "the server failed; the error has been logged"),
}


class JsonErrorsMiddleware:
    """Under ``/api/v1/``, an error answered outside the API's own handlers becomes JSON.

    Django and ninja answer a wrong method (405), a CSRF failure (403) and
    errors raised in other middleware with HTML; an agent must always get
    ``{"error", "field", "detail"}``. Headers that tell the client what to do
    (``Allow``, ``Retry-After``) are kept.
    """

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response: HttpResponse = self.get_response(request)
        if not request.path.startswith(API_PREFIX) or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        status = response.status_code
        error, detail = _PLAIN_ERRORS.get(status, ("http_error", response.reason_phrase))
        detail = detail.format(method=request.method)
        if status == 405 and response.has_header("Allow"):
            detail += f"; allowed: {response['Allow']}"
        replaced = HttpResponse(
            json.dumps({"error": error, "field": None, "detail": detail}),
            status=status,
            content_type="application/json",
        )
        for header in ("Allow", "Retry-After", "WWW-Authenticate"):
            if response.has_header(header):
                replaced[header] = response[header]
        return replaced
