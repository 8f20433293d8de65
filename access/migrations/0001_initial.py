# The access app takes over five models from the project app (issue 11) without
# touching the database: the tables keep their names (db_table) and this
# migration only records the models in the access app's state
# (SeparateDatabaseAndState with no database operations); aetnaweb's 0004 then
# drops them from the project app's state, again without a database operation.
# On a fresh database the tables come from aetnaweb 0001-0003, which run first.
#
# The content types of the moved models are relabelled, so permissions given on
# them (and admin log entries) follow the models instead of going stale.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ["apitoken", "scopegrant", "loginthrottle", "idempotencykey", "ratelimitwindow"]


def _relabel(apps, schema_editor, *, old, new):
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model in MOVED:
        if ContentType.objects.using(db).filter(app_label=new, model=model).exists():
            continue  # already there (created after a partial run): keep it, leave the old one
        ContentType.objects.using(db).filter(app_label=old, model=model).update(app_label=new)


def relabel_forward(apps, schema_editor):
    _relabel(apps, schema_editor, old="aetnaweb", new="access")


def relabel_backward(apps, schema_editor):
    _relabel(apps, schema_editor, old="access", new="aetnaweb")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("aetnaweb", "0003_api_idempotency_ratelimits"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    state_operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100)),
                ("scope", models.CharField(max_length=200)),
                ("scope_tenant", models.CharField(max_length=64)),
                ("scope_user", models.CharField(max_length=64)),
                ("scope_project", models.CharField(max_length=64)),
                ("capabilities", models.JSONField(default=list)),
                ("token_prefix", models.CharField(max_length=16, unique=True)),
                ("token_hash", models.CharField(max_length=64, unique=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("expires_at", models.DateTimeField()),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                ("last_used_at", models.DateTimeField(blank=True, null=True)),
                ("rate_limit_per_minute", models.PositiveIntegerField(blank=True, help_text="API requests this token may make per minute; empty: the server default (AETNAWEB_API_RATE_LIMIT_PER_MINUTE); 0: unlimited.", null=True)),
                ("owner", models.ForeignKey(blank=True, help_text="The account responsible for the agent; it may not approve the agent's plans.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name="api_tokens", to=settings.AUTH_USER_MODEL)),
            ],
            options={
                "db_table": "aetnaweb_apitoken",
                "ordering": ["-created_at"],
            },
        ),
        migrations.CreateModel(
            name="ScopeGrant",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("scope", models.CharField(help_text="Canonical tenant:user:project scope", max_length=200)),
                ("scope_tenant", models.CharField(max_length=64)),
                ("scope_user", models.CharField(max_length=64)),
                ("scope_project", models.CharField(max_length=64)),
                ("role", models.CharField(choices=[("viewer", "Viewer"), ("reviewer", "Reviewer"), ("approver", "Approver"), ("auditor", "Auditor"), ("admin", "Admin")], max_length=16)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("created_by", models.CharField(blank=True, default="", max_length=150)),
                ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="scope_grants", to=settings.AUTH_USER_MODEL)),
            ],
            options={
                "db_table": "aetnaweb_scopegrant",
                "ordering": ["user_id", "scope", "role"],
                "indexes": [models.Index(fields=["user", "role"], name="grant_user_role")],
                "constraints": [models.UniqueConstraint(fields=("user", "scope", "role"), name="grant_unique_user_scope_role")],
            },
        ),
        migrations.CreateModel(
            name="LoginThrottle",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(choices=[("account", "Account"), ("address", "Address")], max_length=8)),
                ("key", models.CharField(max_length=150)),
                ("label", models.CharField(max_length=150)),
                ("failures", models.PositiveIntegerField(default=0)),
                ("first_failure_at", models.DateTimeField()),
                ("last_failure_at", models.DateTimeField()),
                ("retry_at", models.DateTimeField(blank=True, null=True)),
                ("locked_at", models.DateTimeField(blank=True, null=True)),
                ("slowed_audited", models.BooleanField(default=False)),
            ],
            options={
                "db_table": "aetnaweb_loginthrottle",
                "ordering": ["-last_failure_at"],
                "indexes": [models.Index(fields=["last_failure_at"], name="login_throttle_last_failure")],
                "constraints": [models.UniqueConstraint(fields=("kind", "key"), name="login_throttle_unique_kind_key")],
            },
        ),
        migrations.CreateModel(
            name="IdempotencyKey",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("key", models.CharField(max_length=255)),
                ("request_digest", models.CharField(max_length=64)),
                ("created_at", models.DateTimeField()),
                ("expires_at", models.DateTimeField()),
                ("response_status", models.PositiveSmallIntegerField(blank=True, null=True)),
                ("response_content_type", models.CharField(blank=True, default="", max_length=100)),
                ("response_body", models.BinaryField(blank=True, null=True)),
                ("token", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="access.apitoken")),
            ],
            options={
                "db_table": "aetnaweb_idempotencykey",
                "indexes": [models.Index(fields=["expires_at"], name="idempotency_expires")],
                "constraints": [models.UniqueConstraint(fields=("token", "key"), name="idempotency_unique_token_key")],
            },
        ),
        migrations.CreateModel(
            name="RateLimitWindow",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("window_start", models.BigIntegerField(help_text="Unix time of the window's first second")),
                ("count", models.PositiveIntegerField(default=0)),
                ("token", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="access.apitoken")),
            ],
            options={
                "db_table": "aetnaweb_ratelimitwindow",
                "constraints": [models.UniqueConstraint(fields=("token", "window_start"), name="ratelimit_unique_token_window")],
            },
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations, database_operations=[]),
        migrations.RunPython(relabel_forward, relabel_backward),
    ]
