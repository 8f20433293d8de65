"""The access pages: people (invite, grant, revoke, deactivate), API tokens (list, create
with the secret shown once, revoke) and sign-in lockouts.

Only operators with the admin role on a token's scope (or above it) see,
create or revoke it; the checks live in :mod:`access.tokens` services and
:mod:`aetnaweb.access`. A token outside the operator's reach answers 404.
The lockouts page is for platform admins only (the rule lives in
:mod:`access.lockouts`); anyone else gets the same 404 as a missing page.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from access import grants, lockouts, people, ratelimits, selectors, tokens
from access.forms import (
    CAPABILITY_HELP,
    ROLE_HELP,
    GrantForm,
    InviteForm,
    JoinForm,
    TokenCreateForm,
)
from access.models import ScopeGrant
from aetnaweb import access
from aetnaweb.dashboard import dashboard_view, form_refusals, principal_for
from aetnaweb.scopes import Scope

MAX_LOCKOUT_ROWS = 200


def _page(request: HttpRequest, form: TokenCreateForm, *, status: int = 200) -> HttpResponse:
    principal = principal_for(request)
    administered = access.administered_scopes(principal)
    token_list = list(tokens.tokens_administered(principal)[:200])
    used = ratelimits.requests_this_window(token_list)  # one query for the whole list
    for token in token_list:
        token.rate_limit = ratelimits.limit_for(token)  # type: ignore[attr-defined]
        token.rate_used = used.get(token.pk, 0)  # type: ignore[attr-defined]
    return render(
        request,
        "access/tokens.html",
        {
            "form": form,
            "tokens": token_list,
            "administered": administered,
            "capability_help": CAPABILITY_HELP,
            "now": timezone.now(),
            "may_manage_lockouts": access.may_administer(principal, Scope.platform()),
            "default_rate_limit": settings.AETNAWEB_API_RATE_LIMIT_PER_MINUTE,
        },
        status=status,
    )


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def token_list(request: HttpRequest) -> HttpResponse:
    """GET: the tokens the operator administers and the create form. POST: create one."""
    if request.method == "GET":
        return _page(request, TokenCreateForm())
    form = TokenCreateForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    principal = principal_for(request)
    try:
        issued = tokens.create_token(
            principal=principal,
            name=form.cleaned_data["name"],
            scope=form.cleaned_data["scope"],
            capabilities=form.cleaned_data["capabilities"],
            expires_at=form.expires_at(),
            owner=request.user,
            rate_limit_per_minute=form.cleaned_data["rate_limit_per_minute"],
        )
    except access.AccessDenied:
        form.add_error(
            "scope",
            f"You do not hold the admin role on {form.cleaned_data['scope']} or on a scope above it.",
        )
        return _page(request, form, status=400)
    except tokens.TokenError as exc:
        form.add_error(None, str(exc))
        return _page(request, form, status=400)
    # The secret is rendered in this response only: never stored, never redirected.
    return render(
        request,
        "access/token_created.html",
        {"token": issued.token, "secret": issued.secret},
        status=201,
    )


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def token_revoke(request: HttpRequest, prefix: str) -> HttpResponse:
    """GET: confirm. POST: revoke. A token the operator does not administer is a 404."""
    principal = principal_for(request)
    token = tokens.tokens_administered(principal).filter(token_prefix=prefix).first()
    if token is None:
        raise Http404("no such token")
    if request.method == "GET":
        return render(request, "access/token_revoke.html", {"token": token})
    try:
        tokens.revoke_token(principal=principal, token_prefix=prefix)
    except tokens.TokenError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"Token {token.name} ({token.token_prefix}…) is revoked; it no longer works."
        )
    return redirect("tokens:list")


# -- sign-in lockouts (/access/lockouts/) ---------------------------------------------


@never_cache
@require_GET
@dashboard_view
def lockout_list(request: HttpRequest) -> HttpResponse:
    """Who is locked out or slowed right now, with a way to clear one."""
    rows = list(lockouts.current_throttles(principal_for(request))[:MAX_LOCKOUT_ROWS])
    limits = lockouts.thresholds()
    return render(
        request,
        "access/lockouts.html",
        {"rows": rows, "limits": limits, "now": timezone.now(), "max_rows": MAX_LOCKOUT_ROWS},
    )


@require_POST
@dashboard_view
def lockout_clear(request: HttpRequest, throttle_id: int) -> HttpResponse:
    try:
        row = lockouts.clear_throttle(principal=principal_for(request), throttle_id=throttle_id)
    except lockouts.LockoutError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Cleared: sign-in for {row.kind} {row.label} is accepted again.")
    return redirect("lockouts:list")


# -- people and access (/access/people/) -----------------------------------------------


def _people_page(request: HttpRequest, form: InviteForm, *, status: int = 200) -> HttpResponse:
    principal = principal_for(request)
    return render(
        request,
        "access/people.html",
        {
            "people": selectors.people_administered(principal),
            "invitations": selectors.invitations_waiting(principal),
            "administered": access.administered_scopes(principal),
            "form": form,
            "role_help": ROLE_HELP,
            "max_people": selectors.MAX_PEOPLE,
        },
        status=status,
    )


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def people_list(request: HttpRequest) -> HttpResponse:
    """GET: the people an admin manages, waiting invitations, the invite form. POST: invite."""
    principal = principal_for(request)
    if not selectors.administers_people(principal):
        raise Http404("no such page")
    if request.method == "GET":
        return _people_page(request, InviteForm())
    form = InviteForm(request.POST)
    if not form.is_valid():
        return _people_page(request, form, status=400)
    issued = None
    with form_refusals(form) as refused:
        try:
            issued = people.invite_person(
                principal=principal,
                invited_by=request.user,
                username=form.cleaned_data["username"],
                email=form.cleaned_data["email"],
                scope=form.cleaned_data["scope"],
                role=form.cleaned_data["role"],
                expires_in_days=form.cleaned_data["expires_in_days"],
            )
        except access.AccessDenied:
            form.add_error(
                "scope",
                f"You do not hold the admin role on {form.cleaned_data['scope']} or on a scope above it.",
            )
    if refused or issued is None:
        return _people_page(request, form, status=400)
    # The link is rendered in this response only: its token is stored as a hash.
    link = request.build_absolute_uri(reverse("people:join", args=[issued.token]))
    return render(
        request,
        "access/invitation_created.html",
        {"invitation": issued.invitation, "link": link},
        status=201,
    )


def _person_page(
    request: HttpRequest, user_id: int, form: GrantForm, *, status: int = 200
) -> HttpResponse:
    principal = principal_for(request)
    found = selectors.person(principal, user_id)  # out of reach: AccessDenied, a 404
    return render(
        request,
        "access/person.html",
        {
            "person": found,
            "form": form,
            "administered": access.administered_scopes(principal),
            "is_self": found.user.pk == request.user.pk,
            "now": timezone.now(),
        },
        status=status,
    )


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def person_detail(request: HttpRequest, user_id: int) -> HttpResponse:
    """GET: a person's grants and tokens in reach. POST: grant them a role on a scope."""
    if request.method == "GET":
        return _person_page(request, user_id, GrantForm())
    principal = principal_for(request)
    found = selectors.person(principal, user_id)
    form = GrantForm(request.POST)
    if not form.is_valid():
        return _person_page(request, user_id, form, status=400)
    scope, role = form.cleaned_data["scope"], form.cleaned_data["role"]
    with form_refusals(form) as refused:
        try:
            grants.grant_role(user=found.user, scope=scope, role=role, principal=principal)
        except access.AccessDenied:
            form.add_error(
                "scope", f"You do not hold the admin role on {scope} or on a scope above it."
            )
            return _person_page(request, user_id, form, status=400)
    if refused:
        return _person_page(request, user_id, form, status=400)
    messages.success(request, f"{found.user.get_username()} now holds {role} on {scope}.")
    return redirect("people:person", user_id=user_id)


@require_POST
@dashboard_view
def grant_revoke(request: HttpRequest, user_id: int, grant_id: int) -> HttpResponse:
    """Revoke one of a person's grants (one in the operator's reach; else 404)."""
    principal = principal_for(request)
    found = selectors.person(principal, user_id)
    grant: ScopeGrant | None = next((g for g in found.grants if g.pk == grant_id), None)
    if grant is None:
        raise Http404("no such grant")
    grants.revoke_role(user=found.user, scope=grant.scope, role=grant.role, principal=principal)
    messages.success(
        request, f"{found.user.get_username()} no longer holds {grant.role} on {grant.scope}."
    )
    if not selectors.in_reach(principal, user_id):
        return redirect("people:list")
    return redirect("people:person", user_id=user_id)


@never_cache
@require_http_methods(["GET", "POST"])
@dashboard_view
def person_deactivate(request: HttpRequest, user_id: int) -> HttpResponse:
    """GET: what deactivating does to this person. POST: deactivate (audited)."""
    principal = principal_for(request)
    found = selectors.person(principal, user_id)
    if request.method == "GET":
        return render(
            request,
            "access/person_deactivate.html",
            {"person": found, "now": timezone.now(), "is_self": found.user.pk == request.user.pk},
        )
    people.deactivate_person(principal=principal, user=found.user)
    messages.success(
        request,
        f"{found.user.get_username()} is deactivated: they can no longer sign in, and their "
        "live API tokens are revoked.",
    )
    return redirect("people:person", user_id=user_id)


@require_POST
@dashboard_view
def person_reactivate(request: HttpRequest, user_id: int) -> HttpResponse:
    principal = principal_for(request)
    found = selectors.person(principal, user_id)
    people.reactivate_person(principal=principal, user=found.user)
    messages.success(request, f"{found.user.get_username()} can sign in again.")
    return redirect("people:person", user_id=user_id)


@require_POST
@dashboard_view
def invitation_revoke(request: HttpRequest, invitation_id: int) -> HttpResponse:
    invitation = people.revoke_invitation(
        principal=principal_for(request), invitation_id=invitation_id
    )
    messages.success(request, f"The invitation for {invitation.username} no longer works.")
    return redirect("people:list")


@never_cache
@login_not_required
@require_http_methods(["GET", "POST"])
@dashboard_view
def join(request: HttpRequest, token: str) -> HttpResponse:
    """The invitee's page: set a password, and the account and its grant exist.

    An unknown, used, expired or revoked link reads the same (410), so a
    guessed link learns nothing.
    """
    try:
        invitation = people.invitation_for_token(token)
    except people.InvitationInvalid as exc:
        return render(request, "access/join.html", {"invalid": str(exc)}, status=410)
    form = JoinForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with form_refusals(form) as refused:
            people.accept_invitation(
                token=token,
                password=form.cleaned_data["password"],
                password_again=form.cleaned_data["password_again"],
            )
        if not refused:
            messages.success(
                request,
                f"Welcome, {invitation.username}: your account is ready. Sign in with your new password.",
            )
            return redirect("login")
        if isinstance(refused.error, people.InvitationInvalid):
            return render(request, "access/join.html", {"invalid": str(refused.error)}, status=410)
    status = 400 if request.method == "POST" else 200
    return render(
        request,
        "access/join.html",
        {"invitation": invitation, "form": form, "role_help": ROLE_HELP},
        status=status,
    )
