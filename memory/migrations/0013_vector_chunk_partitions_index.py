"""SQLite: index the vector table's chunks on their partition keys (scope, cell, status).

sqlite-vec finds a partition's chunks by an equality on every partition key
of its ``memory_record_vec_chunks`` shadow table, which it creates without
an index, so every partition a search read cost a scan of all the chunks.
Nothing is rewritten: the index is built from the existing chunks. Without a
vector table (no sqlite-vec), and on PostgreSQL, nothing changes.
"""

from django.db import migrations


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    from memory import vectors

    with schema_editor.connection.cursor() as cursor:
        vectors.index_chunk_partitions(cursor)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    from memory import vectors

    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {vectors.CHUNKS_INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0012_gin_fastupdate_off"),
    ]

    operations = [migrations.RunPython(forward, backward)]
