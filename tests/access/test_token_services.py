"""Token services on behalf of an operator: admin role on the token's scope, or nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from access import tokens
from access.models import ApiToken, ScopeGrant
from aetnaweb import access
from aetnaweb.access import SYSTEM
from aetnaweb.scopes import Scope
from audit.models import AuditEvent


def principal_with(django_user_model, grants):
    user = django_user_model.objects.create_user(username="op", password="pw-op-11235!")
    for scope, role in grants:
        parsed = Scope.parse(scope)
        ScopeGrant.objects.create(
            user=user,
            scope=str(parsed),
            role=role,
            **{f"scope_{k}": v for k, v in parsed.columns().items()},
        )
    return user, access.operator_principal(user)


def soon():
    return timezone.now() + timedelta(days=5)


@pytest.mark.django_db
def test_admin_below_platform_issues_inside_its_subtree(django_user_model):
    # Given an admin of acme:*:*
    user, principal = principal_with(django_user_model, [("acme:*:*", "admin")])
    # When they issue a token for acme:alice:proj
    issued = tokens.create_token(
        principal=principal,
        name="bot",
        scope="acme:alice:proj",
        capabilities=["read"],
        expires_at=soon(),
        owner=user,
    )
    # Then it exists, owned by them, audited with their name
    assert issued.token.scope == "acme:alice:proj"
    assert AuditEvent.objects.get(event_type="access.token_created").actor == "op"
    assert list(tokens.tokens_administered(principal)) == [issued.token]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "grants",
    [
        [("acme:alice:*", "admin")],  # a descendant cannot issue for its ancestor
        [("acmecorp:*:*", "admin")],
        [("acme:*:*", "reviewer"), ("acme:*:*", "approver"), ("acme:*:*", "auditor")],
    ],
)
def test_non_admins_are_refused_and_nothing_is_written(django_user_model, grants):
    _, principal = principal_with(django_user_model, grants)
    with pytest.raises(access.AccessDenied):
        tokens.create_token(
            principal=principal,
            name="bot",
            scope="acme:*:*",
            capabilities=["read"],
            expires_at=soon(),
        )
    assert not ApiToken.objects.exists()
    assert not AuditEvent.objects.filter(event_type="access.token_created").exists()


@pytest.mark.django_db
def test_tokens_are_never_administered_by_tokens():
    issued = tokens.create_token(
        principal=SYSTEM,
        name="bot",
        scope="acme:*:*",
        capabilities=["read"],
        expires_at=soon(),
    )
    principal = access.token_principal(issued.token)
    assert access.administered_scopes(principal) == []
    assert not access.may_administer(principal, "acme:*:*")
    assert list(tokens.tokens_administered(principal)) == []


@pytest.mark.django_db
def test_revoke_out_of_reach_looks_like_unknown(django_user_model):
    # Given a token of acme:bob:* and an admin of acme:alice:*
    issued = tokens.create_token(
        principal=SYSTEM,
        name="bob-bot",
        scope="acme:bob:*",
        capabilities=["read"],
        expires_at=soon(),
    )
    _, principal = principal_with(django_user_model, [("acme:alice:*", "admin")])
    before = AuditEvent.objects.count()
    # When they try to revoke it
    with pytest.raises(tokens.TokenError, match="no token with prefix"):
        tokens.revoke_token(principal=principal, token_prefix=issued.token.token_prefix)
    # Then the message is the unknown-token one and nothing changed
    with pytest.raises(tokens.TokenError, match="no token with prefix"):
        tokens.revoke_token(principal=principal, token_prefix="deadbeef")
    assert ApiToken.objects.get().revoked_at is None
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
def test_tokens_administered_is_segment_wise(django_user_model):
    for scope in ["acme:alice:*", "acme:alicex:*", "acmecorp:*:*", "acme:*:*"]:
        tokens.create_token(
            principal=SYSTEM,
            name=scope,
            scope=scope,
            capabilities=["read"],
            expires_at=soon(),
        )
    _, principal = principal_with(django_user_model, [("acme:alice:*", "admin")])
    assert [t.scope for t in tokens.tokens_administered(principal)] == ["acme:alice:*"]
