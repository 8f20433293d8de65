"""Record metadata (memory/metadata.py) and its index on each database.

PostgreSQL: a GIN ``jsonb_path_ops`` index on the column, which answers
``metadata @> '{"key": value}'``. SQLite: the side table
``memory_record_meta(record_pk, record_id, key, value_json)`` indexed on
``(key, value_json, record_pk, record_id)``, written by the services in the record's
transaction. Existing records have no metadata, so nothing is backfilled.
"""

from django.db import migrations, models

SQLITE_FORWARD = [
    "CREATE TABLE IF NOT EXISTS memory_record_meta ("
    "record_pk integer NOT NULL, record_id text NOT NULL, "
    "key text NOT NULL, value_json text NOT NULL, PRIMARY KEY (record_pk, key)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS memory_record_meta_kv "
    "ON memory_record_meta (key, value_json, record_pk, record_id)",
]
POSTGRESQL_FORWARD = [
    "CREATE INDEX IF NOT EXISTS mem_record_metadata_gin "
    "ON memory_record USING gin (metadata jsonb_path_ops)",
]


def forward(apps, schema_editor):
    statements = SQLITE_FORWARD if schema_editor.connection.vendor == "sqlite" else POSTGRESQL_FORWARD
    for statement in statements:
        schema_editor.execute(statement)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute("DROP TABLE IF EXISTS memory_record_meta")
    else:
        schema_editor.execute("DROP INDEX IF EXISTS mem_record_metadata_gin")


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0009_binary_coarse_vectors"),
    ]

    operations = [
        migrations.AddField(
            model_name="record",
            name="metadata",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(forward, backward),
    ]
