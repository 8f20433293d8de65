"""PostgreSQL: the memory app's GIN indexes update in place (``fastupdate = off``).

With GIN's default fast update, new entries wait in a pending list that
every search reads from start to end until VACUUM merges it: on a scope of
100,000 records written one by one, the full-text lookup of a rare word took
1.5 ms instead of 0.05 ms (277 pending pages), the same for every recall.
Off, each insert updates the index itself (a little slower per write) and a
search costs what the index says. The pending list left by earlier writes is
merged here. SQLite has no GIN indexes: nothing to do.
"""

from django.db import migrations

INDEXES = ("memory_record_fts_document", "mem_record_metadata_gin")


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for index in INDEXES:
        schema_editor.execute(f"ALTER INDEX IF EXISTS {index} SET (fastupdate = off)")
        schema_editor.execute(
            "SELECT gin_clean_pending_list(c.oid) FROM pg_class c WHERE c.relname = %s",
            [index],
        )


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for index in INDEXES:
        schema_editor.execute(f"ALTER INDEX IF EXISTS {index} SET (fastupdate = on)")


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0011_vector_cells"),
    ]

    operations = [migrations.RunPython(forward, backward)]
