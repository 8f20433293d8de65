from __future__ import annotations

import pytest

from access.models import Role, ScopeGrant
from aetnaweb import access
from aetnaweb.scopes import Scope


def grant(user, scope: str, role: str) -> ScopeGrant:
    parsed = Scope.parse(scope)
    return ScopeGrant.objects.create(
        user=user,
        scope=str(parsed),
        scope_tenant=parsed.tenant,
        scope_user=parsed.user,
        scope_project=parsed.project,
        role=role,
    )


@pytest.mark.django_db
def test_reviewer_acts_down_reads_up_and_never_sideways(operator):
    # Given a reviewer on acme:alice:*
    grant(operator, "acme:alice:*", Role.REVIEWER)
    principal = access.operator_principal(operator)
    # Then they act on the subtree, read ancestors, and see no sibling or prefix twin
    assert access.may(principal, access.REVIEW, "acme:alice:proj")
    assert access.may(principal, access.READ, "acme:*:*")
    assert access.may(principal, access.READ, "platform:*:*")
    assert not access.may(principal, access.REVIEW, "acme:*:*")
    assert not access.may(principal, access.READ, "acme:bob:*")
    assert not access.may(principal, access.READ, "acme:alicex:*")
    assert not access.may(principal, access.APPROVE, "acme:alice:proj")
    with pytest.raises(access.AccessDenied):
        access.require(principal, access.READ, "acmecorp:*:*")


@pytest.mark.django_db
def test_scope_q_filters_grants_by_columns(operator):
    grant(operator, "acme:alice:*", Role.VIEWER)
    principal = access.operator_principal(operator)
    q = access.scope_q(principal, access.READ, prefix="scope_")
    matching = ScopeGrant.objects.filter(q)
    assert list(matching.values_list("scope", flat=True)) == ["acme:alice:*"]


@pytest.mark.django_db
def test_platform_grant_sees_everything(operator):
    grant(operator, "platform:*:*", Role.ADMIN)
    grant(operator, "zeta:*:*", Role.VIEWER)
    principal = access.operator_principal(operator)
    assert access.scope_q(principal, access.READ, prefix="scope_") == access.Q()
    assert access.may(principal, access.APPROVE, "zeta:u:p")
