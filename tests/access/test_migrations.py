"""The move of grants, tokens and lockouts into the access app touches no table and loses no row."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from access import tokens
from access.models import IdempotencyKey, LoginThrottle, RateLimitWindow, ScopeGrant
from aetnaweb.access import operator_principal

# The project app's last migration before the move; access did not exist yet.
OLD_HEAD = [("aetnaweb", "0003_api_idempotency_ratelimits"), ("access", None)]
MOVED = ["apitoken", "scopegrant", "loginthrottle", "idempotencykey", "ratelimitwindow"]
RAW_TOKEN = "aetna_0ld0ld00_survives-the-move"
# Tables that access migrations after the move create (so absent at OLD_HEAD).
LATER_TABLES = {"access_invitation", "access_keptanswername"}


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor


def _leaf_nodes():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _seed_old_rows(old_apps):
    User = old_apps.get_model("auth", "User")
    user = User.objects.create(username="keeper")
    now = timezone.now()
    old_apps.get_model("aetnaweb", "ScopeGrant").objects.create(
        user=user,
        scope="acme:*:*",
        scope_tenant="acme",
        scope_user="*",
        scope_project="*",
        role="admin",
        created_by="system",
    )
    token = old_apps.get_model("aetnaweb", "ApiToken").objects.create(
        name="old-bot",
        owner=user,
        scope="acme:keeper:*",
        scope_tenant="acme",
        scope_user="keeper",
        scope_project="*",
        capabilities=["read"],
        token_prefix="0ld0ld00",
        token_hash=tokens.hash_token(RAW_TOKEN),
        expires_at=now + timedelta(days=30),
        rate_limit_per_minute=7,
    )
    old_apps.get_model("aetnaweb", "RateLimitWindow").objects.create(
        token=token, window_start=60, count=3
    )
    old_apps.get_model("aetnaweb", "IdempotencyKey").objects.create(
        token=token,
        key="retry-1",
        request_digest="0" * 64,
        created_at=now,
        expires_at=now + timedelta(days=1),
        response_status=201,
    )
    old_apps.get_model("aetnaweb", "LoginThrottle").objects.create(
        kind="account",
        key="keeper",
        label="keeper",
        failures=4,
        first_failure_at=now,
        last_failure_at=now,
    )
    # A permission given on an old content type must follow the model.
    OldContentType = old_apps.get_model("contenttypes", "ContentType")
    # An old database has them under the project app only (the backward step
    # relabelled this one's; start from none to pin what the forward step does).
    OldContentType.objects.filter(model__in=MOVED).delete()
    old_type = OldContentType.objects.create(app_label="aetnaweb", model="apitoken")
    OldPermission = old_apps.get_model("auth", "Permission")
    permission = OldPermission.objects.create(
        content_type=old_type, codename="view_apitoken", name="Can view api token"
    )
    user.user_permissions.add(permission)


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_the_move_are_read_by_the_access_app_after_it():
    # Given a database at the project app's last migration before the move, with a row in each table
    tables_at_new_head = set(connection.introspection.table_names()) - LATER_TABLES
    executor = _migrate(OLD_HEAD)
    try:
        assert set(connection.introspection.table_names()) == tables_at_new_head
        # The state of every app as that database has it: the others at their heads.
        others = [node for node in _leaf_nodes() if node[0] not in {"access", "aetnaweb"}]
        _seed_old_rows(executor.loader.project_state([*others, OLD_HEAD[0]]).apps)

        # When it migrates to the current head
        _migrate(_leaf_nodes())
    finally:
        _migrate(_leaf_nodes())  # never leave the test database behind
        ContentType.objects.clear_cache()

    # Then no table was created, renamed or dropped by the move
    assert set(connection.introspection.table_names()) - LATER_TABLES == tables_at_new_head
    # And every row is there, read through the access app's models and services
    grant = ScopeGrant.objects.get(user__username="keeper")
    assert (grant.scope, grant.role) == ("acme:*:*", "admin")
    assert operator_principal(grant.user).bindings[0][0].tenant == "acme"
    token = tokens.authenticate(RAW_TOKEN)
    assert (token.name, token.rate_limit_per_minute) == ("old-bot", 7)
    assert RateLimitWindow.objects.get(token=token).count == 3
    assert IdempotencyKey.objects.get(token=token).response_status == 201
    assert LoginThrottle.objects.get(key="keeper").failures == 4
    # And the permission now names the model in its new app
    assert grant.user.has_perm("access.view_apitoken")
    assert not ContentType.objects.filter(app_label="aetnaweb", model__in=MOVED).exists()
    assert Permission.objects.get(codename="view_apitoken").content_type.app_label == "access"


@pytest.mark.parametrize(
    ("app", "migration"), [("access", "0001_initial"), ("aetnaweb", "0004_models_move_to_access")]
)
def test_the_move_migrations_run_no_schema_sql(app, migration, transactional_db):
    # Given either half of the move / When its SQL is printed
    out = StringIO()
    call_command("sqlmigrate", app, migration, stdout=out)
    sql = out.getvalue().upper()
    # Then it creates, alters, renames and drops nothing
    for statement in ("CREATE ", "ALTER ", "DROP ", "RENAME "):
        assert statement not in sql


def test_old_admin_addresses_of_the_moved_models_redirect_to_their_new_ones(admin_client):
    # Given a bookmark to the grant admin from before the move
    response = admin_client.get("/admin/aetnaweb/scopegrant/?role=admin")
    # Then it lands on the same page under the access app, query kept
    assert response.status_code == 302
    assert response["Location"] == "/admin/access/scopegrant/?role=admin"
    assert admin_client.get(response["Location"]).status_code == 200
    # And the project app's own admin paths are not captured
    assert admin_client.get("/admin/aetnaweb/other/").status_code == 404


def test_the_models_match_their_migrations(db):
    # Given the models as they are / When makemigrations checks them / Then nothing is missing
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
