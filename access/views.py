"""The access pages: API tokens (list, create with the secret shown once, revoke) and sign-in lockouts.

Only operators with the admin role on a token's scope (or above it) see,
create or revoke it; the checks live in :mod:`access.tokens` services and
:mod:`aetnaweb.access`. A token outside the operator's reach answers 404.
The lockouts page is for platform admins only (the rule lives in
:mod:`access.lockouts`); anyone else gets the same 404 as a missing page.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from access import lockouts, ratelimits, tokens
from access.forms import CAPABILITY_HELP, TokenCreateForm
from aetnaweb import access
from aetnaweb.dashboard import dashboard_view, principal_for
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
