"""Test factories for the dashboard: operators with grants, and the permission matrix.

Every dashboard view test uses these, so that "who may see this page" is
tested the same way everywhere (design.md "Tests": a permission matrix per
view and per POST).

Operators
---------
``make_operator("alice", grants=[("acme:alice:*", "reviewer")])`` creates a
user with the password :data:`PASSWORD` and gives it each grant through the
real service (:func:`access.grants.grant_role`, which also writes an
``access.grant_added`` audit event in the granted scope's chain: count audit
rows after setting up, not from zero). ``login_as(client, user)`` signs the
test client in without going through the login form.

Permission matrix
-----------------
``access_matrix(scope, role=..., wrong_role=...)`` returns the standard cases
for a page or POST that acts on ``scope``:

- anonymous (not signed in): redirect to the login page;
- no grant: 404;
- sibling grant (``role`` on ``acme:bob:*`` for ``acme:alice:*``): 404;
- prefix twins (``role`` on ``acmecorp:*:*``, ``acme:alicex:*``): 404;
- right grant, wrong role (``wrong_role`` on ``scope``; only when given): 404;
- right grant and role (``role`` on ``scope``): the success status.

Use it with ``parametrize``::

    @pytest.mark.django_db
    @pytest.mark.parametrize(
        "case", access_matrix("acme:alice:*", role="auditor", wrong_role="viewer")
    )
    def test_export_permissions(client, case):
        case.sign_in(client)                        # creates the user + grants
        response = client.get(url)
        case.check(response)                        # login redirect / 404 / 200

``check(response, ok=302)`` accepts another success status (a POST that
redirects). Pages that list "whatever you may see" rather than one scope
answer 200 to everyone signed in; there, test ``case.allowed`` against the
content instead of calling ``check``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from access.grants import grant_role
from access.ratelimits import WINDOW_SECONDS
from aetnaweb.access import SYSTEM
from aetnaweb.scopes import Scope

PASSWORD = "pw-Operator-2718!"  # every factory user's password (tests only)

ANONYMOUS = "anonymous"
DENIED = "denied"
ALLOWED = "allowed"


def start_well_inside_a_minute(margin_seconds: float = 5.0) -> None:
    """Wait for the next window when less than ``margin_seconds`` of this one are left.

    API rate limits count requests per fixed minute (``access/ratelimits.py``),
    and retention keeps only the current minute's window. A test that makes
    real requests and counts them, or compares rows against "this minute",
    fails when a minute ends in the middle of it: the four-connection rate-limit
    test let 8 or 9 of 12 requests through that way, 5 of them in the new
    window, which a fixed window allows by design.
    """
    left = WINDOW_SECONDS - time.time() % WINDOW_SECONDS
    if left < margin_seconds:
        time.sleep(left + 0.05)


def make_operator(
    username: str,
    grants: Iterable[tuple[str, str]] = (),
    *,
    password: str = PASSWORD,
    is_staff: bool = False,
    is_superuser: bool = False,
) -> Any:
    """A user who can sign in, holding each ``(scope, role)`` grant (through the grant service)."""
    user_model = get_user_model()
    if is_superuser:
        user = user_model.objects.create_superuser(username=username, password=password)
    else:
        user = user_model.objects.create_user(
            username=username, password=password, is_staff=is_staff
        )
    for scope, role in grants:
        grant_role(principal=SYSTEM, user=user, scope=scope, role=role)
    return user


def login_as(client: Client, user: Any) -> Client:
    """Sign ``client`` in as ``user`` (no login form, no password check)."""
    client.force_login(user)
    return client


def htmx_headers(target: str | None = None) -> dict[str, str]:
    """Headers that make django-htmx set ``request.htmx`` (optionally with ``HX-Target``)."""
    headers = {"HX-Request": "true"}
    if target:
        headers["HX-Target"] = target
    return headers


def sibling_of(scope: Scope) -> Scope:
    """A scope at the same depth sharing the parent but nothing else (acme:alice:* -> acme:bob:*)."""
    if scope.depth == 1:
        return Scope.of("globex")
    if scope.depth == 2:
        return Scope.of(scope.tenant, "bob" if scope.user != "bob" else "carol")
    if scope.depth == 3:
        other = "other" if scope.project != "other" else "another"
        return Scope.of(scope.tenant, scope.user, other)
    raise ValueError("platform:*:* has no sibling")


def prefix_twins_of(scope: Scope) -> list[Scope]:
    """Scopes whose strings start like ``scope``'s segments but are different scopes.

    ``acmecorp:*:*`` for anything in ``acme``, ``acme:alicex:*`` for anything
    under ``acme:alice``, ``acme:alice:projx`` for ``acme:alice:proj``: a grant
    on a twin must never reach ``scope``.
    """
    twins = [Scope.of(f"{scope.tenant}corp")]  # the whole twin tenant: the broadest twin grant
    if scope.depth >= 2:
        twins.append(Scope.of(scope.tenant, f"{scope.user}x"))
    if scope.depth == 3:
        twins.append(Scope.of(scope.tenant, scope.user, f"{scope.project}x"))
    return twins


@dataclass(frozen=True)
class AccessCase:
    """One row of a permission matrix: who signs in (with which grants) and what should happen."""

    label: str
    grants: tuple[tuple[str, str], ...] | None  # None: not signed in
    outcome: str  # ANONYMOUS, DENIED or ALLOWED

    def __str__(self) -> str:
        return self.label.replace(" ", "-")

    @property
    def allowed(self) -> bool:
        return self.outcome == ALLOWED

    def sign_in(self, client: Client, username: str = "matrix-user") -> Any:
        """Create this case's user and grants and sign ``client`` in; ``None`` for anonymous."""
        if self.grants is None:
            return None
        user = make_operator(username, self.grants)
        login_as(client, user)
        return user

    def check(self, response: Any, *, ok: int | Sequence[int] = 200) -> None:
        """Assert the response matches this case: login redirect, 404, or ``ok``."""
        if self.outcome == ANONYMOUS:
            assert response.status_code == 302, response.status_code
            assert response["Location"].startswith(reverse(settings.LOGIN_URL)), response[
                "Location"
            ]
        elif self.outcome == DENIED:
            assert response.status_code == 404, (self.label, response.status_code)
        else:
            expected = (ok,) if isinstance(ok, int) else tuple(ok)
            assert response.status_code in expected, (self.label, response.status_code)


def access_matrix(
    scope: str | Scope,
    *,
    role: str,
    wrong_role: str | None = None,
    ok_grant: str | Scope | None = None,
) -> list[Any]:
    """The standard permission cases for a page or POST acting on ``scope``.

    ``role`` is the role that may do it; ``wrong_role`` (if the page is
    role-gated) a role that may see the scope but not do this. ``ok_grant``
    grants the right role on another scope instead (e.g. the tenant, to show
    a grant covers descendants). Returns ``pytest.param`` objects with ids.
    """
    parsed = Scope.parse(scope)
    granted = str(Scope.parse(ok_grant)) if ok_grant is not None else str(parsed)
    cases = [
        AccessCase("anonymous", None, ANONYMOUS),
        AccessCase("no grant", (), DENIED),
        AccessCase("sibling grant", ((str(sibling_of(parsed)), role),), DENIED),
    ]
    for twin in prefix_twins_of(parsed):
        cases.append(AccessCase(f"prefix twin {twin.level}", ((str(twin), role),), DENIED))
    if wrong_role is not None:
        cases.append(AccessCase("right grant wrong role", ((granted, wrong_role),), DENIED))
    cases.append(AccessCase("right grant and role", ((granted, role),), ALLOWED))
    return [pytest.param(case, id=str(case)) for case in cases]


@pytest.fixture
def signed_in(client: Client):
    """``signed_in("alice", [("acme:alice:*", "viewer")])`` -> a client signed in as that new operator."""

    def make(username: str, grants: Iterable[tuple[str, str]] = ()) -> Client:
        login_as(client, make_operator(username, grants))
        return client

    return make


# -- authorizing evidence for guarded actions (issue 10 item 3) ------------------------

AUTHORIZING_SCOPE = "platform:*:*"  # an ancestor of every scope a test stages at


def authorizing_episode_id(ref: str) -> str:
    return "epi_" + hashlib.sha256(ref.encode("utf-8")).hexdigest()[:32]


def authorizing_evidence(ref: str = "msg-1") -> dict[str, Any]:
    """``authorized_by`` evidence citing the user message ``ref`` (see ensure_authorizing_episode).

    Pure data, so parametrize lists may build it at collection time.
    """
    return {
        "kind": "episode",
        "ref_id": authorizing_episode_id(ref),
        "digest": hashlib.sha256(ref.encode("utf-8")).hexdigest(),
        "relation": "authorized_by",
        "trust_tier": "trusted_user",
        "attested": True,
    }


def ensure_authorizing_episode(ref: str = "msg-1") -> Any:
    """The stored user message ``ref`` that :func:`authorizing_evidence` cites (a fixture row)."""
    from memory.models import Episode, SourceType

    scope = Scope.parse(AUTHORIZING_SCOPE)
    episode, _ = Episode.objects.get_or_create(
        episode_id=authorizing_episode_id(ref),
        defaults={
            "scope": str(scope),
            **scope.columns(),
            "source_type": SourceType.USER_MESSAGE,
            "text": ref,
            "created_at": timezone.now(),
        },
    )
    return episode


@pytest.fixture
def authorizing_messages(request: pytest.FixtureRequest) -> None:
    """For tests that use the database: the messages the standard evidence cites exist."""
    if request.node.get_closest_marker("django_db") is None:
        return
    request.getfixturevalue("_django_db_helper")
    for ref in ("msg-1", "msg-2"):
        ensure_authorizing_episode(ref)
