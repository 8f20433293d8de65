"""Grant services, ``manage.py access`` and the demo accounts."""

from __future__ import annotations

import json
import stat
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from access import demo as demo_users
from access import grants, tokens
from access.models import ApiToken, ScopeGrant
from aetnaweb import access
from aetnaweb.access import SYSTEM
from aetnaweb.scopes import ScopeError
from audit.models import AuditEvent
from tests.factories import make_operator


def audit_rows() -> int:
    return AuditEvent.objects.count()


# -- services ----------------------------------------------------------------------


@pytest.mark.django_db
def test_grant_role_stores_columns_and_audits_in_the_granted_scope():
    # Given a user
    user = make_operator("alice")
    # When the system grants a reviewer role on acme:alice:*
    grant = grants.grant_role(principal=SYSTEM, user=user, scope="acme:alice:*", role="reviewer")
    # Then the row carries the split columns and the chain of acme:alice:* records it
    assert (grant.scope_tenant, grant.scope_user, grant.scope_project) == ("acme", "alice", "*")
    event = AuditEvent.objects.get(event_type="access.grant_added")
    assert event.subject_id == "acme:alice:*"
    assert event.actor == "system"
    assert json.loads(event.payload) == {
        "role": "reviewer",
        "scope": "acme:alice:*",
        "user": "alice",
        "user_id": user.pk,
    }
    # And the principal now holds the role's capabilities there
    principal = access.operator_principal(user)
    assert access.may(principal, access.REVIEW, "acme:alice:proj")


@pytest.mark.django_db
def test_revoke_role_removes_exactly_one_grant_and_audits():
    # Given two grants on a scope and its parent
    user = make_operator("alice", [("acme:*:*", "viewer"), ("acme:alice:*", "viewer")])
    # When the narrower one is revoked
    grants.revoke_role(principal=SYSTEM, user=user, scope="acme:alice:*", role="viewer")
    # Then the tenant grant stays (a revoke never cascades) and the revoke is audited
    assert list(ScopeGrant.objects.values_list("scope", flat=True)) == ["acme:*:*"]
    event = AuditEvent.objects.get(event_type="access.grant_revoked")
    assert event.subject_id == "acme:alice:*"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("scope", "role", "error"),
    [
        ("acme:alice", "viewer", ScopeError),
        ("platform:bob:*", "viewer", ScopeError),
        ("acme:*:secret", "viewer", ScopeError),
        ("acme:*:*", "overlord", grants.GrantError),
    ],
)
def test_grant_refusals_write_nothing(scope, role, error):
    # Given a user and the current audit size
    user = make_operator("alice")
    before = audit_rows()
    # When an invalid grant is asked for, it is refused
    with pytest.raises(error):
        grants.grant_role(principal=SYSTEM, user=user, scope=scope, role=role)
    # Then nothing was written
    assert ScopeGrant.objects.count() == 0
    assert audit_rows() == before


@pytest.mark.django_db
def test_duplicate_grant_is_refused_and_writes_nothing():
    user = make_operator("alice", [("acme:*:*", "viewer")])
    before = audit_rows()
    with pytest.raises(grants.GrantError, match="already holds viewer on acme:\\*:\\*"):
        grants.grant_role(principal=SYSTEM, user=user, scope="acme:*:*", role="viewer")
    assert ScopeGrant.objects.count() == 1
    assert audit_rows() == before


@pytest.mark.django_db
def test_revoking_a_missing_grant_is_refused_and_writes_nothing():
    user = make_operator("alice", [("acme:*:*", "viewer")])
    before = audit_rows()
    with pytest.raises(grants.GrantError, match="holds no reviewer grant"):
        grants.revoke_role(principal=SYSTEM, user=user, scope="acme:*:*", role="reviewer")
    assert ScopeGrant.objects.count() == 1
    assert audit_rows() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("granter_grants", "scope", "allowed"),
    [
        ([("acme:*:*", "admin")], "acme:alice:*", True),
        ([("platform:*:*", "admin")], "globex:*:*", True),
        ([("acme:alice:*", "admin")], "acme:*:*", False),  # an ancestor: above their grant
        ([("acme:*:*", "admin")], "acmecorp:*:*", False),  # a prefix twin
        ([("acme:*:*", "auditor")], "acme:alice:*", False),  # not an admin
    ],
)
def test_only_an_admin_covering_the_scope_may_grant(granter_grants, scope, allowed):
    # Given an operator with some grants and a target user
    granter = access.operator_principal(make_operator("boss", granter_grants))
    target = make_operator("alice")
    before = audit_rows()
    # When the operator grants a role
    if allowed:
        grants.grant_role(user=target, scope=scope, role="viewer", principal=granter)
        # Then it is recorded with the operator as actor
        assert AuditEvent.objects.filter(event_type="access.grant_added", actor="boss").exists()
    else:
        with pytest.raises(access.AccessDenied):
            grants.grant_role(user=target, scope=scope, role="viewer", principal=granter)
        assert not ScopeGrant.objects.filter(user=target).exists()
        assert audit_rows() == before


# -- manage.py access -------------------------------------------------------------


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("access", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_access_grant_list_and_revoke():
    make_operator("alice")
    out, _ = run("grant", "alice", "acme:alice:*", "reviewer")
    assert out.strip() == "granted reviewer on acme:alice:* to alice"
    out, _ = run("list")
    assert "alice" in out and "reviewer" in out and "acme:alice:*" in out
    out, _ = run("list", "--user", "alice")
    assert out.count("\n") == 1
    out, _ = run("revoke", "alice", "acme:alice:*", "reviewer")
    assert out.strip() == "revoked reviewer on acme:alice:* from alice"
    assert run("list")[0].strip() == "no grants"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("grant", "nobody", "acme:*:*", "viewer"), "no user named 'nobody'"),
        (("grant", "alice", "acme:alice", "viewer"), "expected exactly three segments"),
        (("grant", "alice", "platform:bob:*", "viewer"), "'platform' is reserved"),
        (("grant", "alice", "acme:*:*", "overlord"), "unknown role 'overlord'"),
        (("revoke", "alice", "acme:*:*", "viewer"), "holds no viewer grant"),
        (("list", "--user", "nobody"), "no user named 'nobody'"),
    ],
)
def test_access_refusals_are_one_line_exit_2_and_write_nothing(args, message):
    # Given a user and the current state
    make_operator("alice")
    before = (ScopeGrant.objects.count(), audit_rows())
    # When the command is refused
    with pytest.raises(CommandError) as caught:
        run(*args)
    # Then the message is one actionable line, the exit status 2, nothing written
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert caught.value.returncode == 2
    assert (ScopeGrant.objects.count(), audit_rows()) == before


@pytest.mark.django_db
def test_access_duplicate_grant_is_refused():
    make_operator("alice", [("acme:*:*", "viewer")])
    with pytest.raises(CommandError, match="already holds viewer") as caught:
        run("grant", "alice", "acme:*:*", "viewer")
    assert caught.value.returncode == 2


@pytest.mark.django_db
def test_access_token_create_list_revoke():
    # Given an owner account
    make_operator("owner")
    # When a token is created, the secret is printed once, on its own line
    out, _ = run(
        "token", "create", "--name", "ci-agent", "--scope", "acme:alice:*",
        "--capabilities", "read,write", "--expires-days", "30", "--owner", "owner",
    )  # fmt: skip
    secret = out.strip().splitlines()[-1]
    token = ApiToken.objects.get()
    assert tokens.authenticate(secret).pk == token.pk
    assert token.owner.get_username() == "owner"
    assert sorted(token.capabilities) == ["read", "write"]
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    # And the listing shows the prefix but never the secret
    listing, _ = run("token", "list")
    assert token.token_prefix in listing and secret not in listing
    assert "active until" in listing
    # When it is revoked by prefix, it no longer authenticates
    out, _ = run("token", "revoke", token.token_prefix)
    assert out.startswith(f"revoked token {token.token_prefix}")
    with pytest.raises(tokens.TokenAuthenticationError):
        tokens.authenticate(secret)
    assert "revoked" in run("token", "list")[0]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--scope", "acme:*", "--capabilities", "read"), "expected exactly three segments"),
        (("--scope", "acme:*:*", "--capabilities", "read,approve"), "tokens cannot hold approve"),
        (("--scope", "acme:*:*", "--capabilities", "fly"), "unknown capabilities: fly"),
        (
            ("--scope", "acme:*:*", "--capabilities", "read", "--expires-days", "0"),
            "--expires-days must be at least 1",
        ),
        (
            ("--scope", "acme:*:*", "--capabilities", "read", "--expires-days", "400"),
            "at most 366 days",
        ),
        (("--scope", "acme:*:*", "--capabilities", "read", "--owner", "ghost"), "no user named"),
    ],
)
def test_access_token_create_refusals_write_nothing(args, message):
    before = audit_rows()
    with pytest.raises(CommandError, match=message) as caught:
        run("token", "create", "--name", "agent", *args)
    assert caught.value.returncode == 2
    assert ApiToken.objects.count() == 0
    assert audit_rows() == before


@pytest.mark.django_db
def test_access_token_revoke_unknown_prefix_is_refused():
    with pytest.raises(CommandError, match="no token with prefix 'deadbeef'") as caught:
        run("token", "revoke", "deadbeef")
    assert caught.value.returncode == 2


@pytest.mark.django_db
def test_access_token_list_when_empty():
    assert run("token", "list")[0].strip() == "no tokens"


# -- demo accounts ------------------------------------------------------------------


@pytest.mark.django_db
def test_seed_users_is_idempotent_and_keeps_the_password_private(tmp_path):
    # Given no demo accounts
    login_file = tmp_path / "demo_login.txt"
    # When the demo accounts are seeded
    first = demo_users.seed_users(login_file=login_file)
    # Then admin is a superuser with the admin role on the platform, the file is 0600
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(first.password)
    assert ScopeGrant.objects.filter(user=admin, scope="platform:*:*", role="admin").exists()
    assert stat.S_IMODE(login_file.stat().st_mode) == 0o600
    assert first.password in login_file.read_text()
    assert set(first.created) == set(first.usernames)
    # And every demo operator signs in with the same password and holds one role per tenant
    rita = get_user_model().objects.get(username="rita")
    assert rita.check_password(first.password) and not rita.is_staff
    assert access.may(access.operator_principal(rita), access.REVIEW, "acme:alice:proj")
    assert not access.may(access.operator_principal(rita), access.READ, "globex:*:*")
    counts = (get_user_model().objects.count(), ScopeGrant.objects.count(), audit_rows())
    # When it runs again
    second = demo_users.seed_users(login_file=login_file)
    # Then nothing changes
    assert second.password == first.password and second.created == ()
    assert (get_user_model().objects.count(), ScopeGrant.objects.count(), audit_rows()) == counts
    assert "admin" in second.describe() and str(login_file) in second.describe()


@pytest.mark.django_db
def test_seed_users_sets_a_new_password_only_when_the_file_is_missing(tmp_path):
    login_file = tmp_path / "demo_login.txt"
    first = demo_users.seed_users(login_file=login_file)
    login_file.unlink()
    second = demo_users.seed_users(login_file=login_file)
    assert second.password != first.password
    admin = get_user_model().objects.get(username="admin")
    assert admin.check_password(second.password)
    assert second.created == ()
