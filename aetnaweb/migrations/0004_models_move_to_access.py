# Grants, API tokens, rate-limit windows, idempotency keys and sign-in throttles
# now belong to the access app (issue 11; see access/migrations/0001_initial.py).
# State only: the tables stay exactly as they are, with every row.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("aetnaweb", "0003_api_idempotency_ratelimits"),
        ("access", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                # Those pointing at ApiToken first.
                migrations.DeleteModel(name="IdempotencyKey"),
                migrations.DeleteModel(name="RateLimitWindow"),
                migrations.DeleteModel(name="ApiToken"),
                migrations.DeleteModel(name="ScopeGrant"),
                migrations.DeleteModel(name="LoginThrottle"),
            ],
            database_operations=[],
        ),
    ]
