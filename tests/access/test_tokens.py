from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from access import tokens
from access.models import ApiToken
from aetnaweb import access
from aetnaweb.access import SYSTEM
from aetnaweb.scopes import ScopeError
from audit.models import AuditEvent


def soon(days: int = 30):
    return timezone.now() + timedelta(days=days)


@pytest.mark.django_db
def test_token_is_shown_once_and_stored_hashed():
    # Given a new token / When issued
    issued = tokens.create_token(
        principal=SYSTEM,
        name="ci-agent",
        scope="acme:alice:*",
        capabilities=["read", "write"],
        expires_at=soon(),
    )
    # Then only its hash is stored and it authenticates
    stored = ApiToken.objects.get()
    assert issued.secret not in (stored.token_hash, stored.token_prefix)
    assert stored.token_hash == tokens.hash_token(issued.secret)
    assert tokens.authenticate(issued.secret).pk == stored.pk
    # And the audit chain records the issue without the secret
    event = AuditEvent.objects.get(event_type="access.token_created")
    assert event.subject_id == "acme:alice:*"
    assert issued.secret not in event.payload
    assert issued.secret.split("_")[-1] not in event.payload


@pytest.mark.django_db
@pytest.mark.parametrize("cap", ["review", "approve"])
def test_tokens_can_never_review_or_approve(cap):
    with pytest.raises(tokens.TokenError, match="stay with people"):
        tokens.create_token(
            principal=SYSTEM,
            name="x",
            scope="acme:*:*",
            capabilities=["read", cap],
            expires_at=soon(),
        )
    assert not ApiToken.objects.exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_refusals_write_nothing():
    with pytest.raises(tokens.TokenError, match="future"):
        tokens.create_token(
            principal=SYSTEM,
            name="x",
            scope="acme:*:*",
            capabilities=["read"],
            expires_at=soon(-1),
        )
    with pytest.raises(ScopeError):
        tokens.create_token(
            principal=SYSTEM,
            name="x",
            scope="acme:*:bad",
            capabilities=["read"],
            expires_at=soon(),
        )
    with pytest.raises(tokens.TokenError, match="unknown"):
        tokens.create_token(
            principal=SYSTEM,
            name="x",
            scope="acme:*:*",
            capabilities=["fly"],
            expires_at=soon(),
        )
    assert not ApiToken.objects.exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_revoked_expired_and_unknown_tokens_do_not_authenticate():
    issued = tokens.create_token(
        principal=SYSTEM,
        name="x",
        scope="acme:*:*",
        capabilities=["read"],
        expires_at=soon(),
    )
    tokens.revoke_token(
        principal=SYSTEM,
        token_prefix=issued.token.token_prefix,
    )
    with pytest.raises(tokens.TokenAuthenticationError, match="revoked"):
        tokens.authenticate(issued.secret)
    with pytest.raises(tokens.TokenError, match="already revoked"):
        tokens.revoke_token(
            principal=SYSTEM,
            token_prefix=issued.token.token_prefix,
        )
    other = tokens.create_token(
        principal=SYSTEM,
        name="y",
        scope="acme:*:*",
        capabilities=["read"],
        expires_at=soon(),
    )
    ApiToken.objects.filter(pk=other.token.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    with pytest.raises(tokens.TokenAuthenticationError, match="expired"):
        tokens.authenticate(other.secret)
    for raw in (None, "", "Bearer x", "aetna_nope"):
        with pytest.raises(tokens.TokenAuthenticationError):
            tokens.authenticate(raw)


@pytest.mark.django_db
def test_token_principal_stays_in_its_subtree():
    issued = tokens.create_token(
        principal=SYSTEM,
        name="x",
        scope="acme:alice:*",
        capabilities=["read", "write"],
        expires_at=soon(),
    )
    principal = access.token_principal(issued.token)
    assert principal.label == "agent:x"
    assert access.may(principal, access.WRITE, "acme:alice:proj")
    assert not access.may(principal, access.READ, "acme:*:*")
    assert not access.may(principal, access.READ, "acme:bob:*")
    assert not access.may(principal, access.FORGET, "acme:alice:*")
