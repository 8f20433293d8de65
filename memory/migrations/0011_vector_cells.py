"""SQLite: the vector index gets a ``cell`` partition key, so a big scope's search reads only its nearest cells.

``status`` becomes a partition key as well (checked once per chunk of
vectors instead of once per vector).

Every stored vector is kept, in cell 0 (nothing is split yet); the next
semantic reindex, or the job a scope queues when it crosses the threshold,
clusters the big scopes (memory/vector_cells.py). PostgreSQL is unchanged.
"""

from django.db import migrations


def forward(apps, schema_editor):
    from memory import vectors

    vectors.cell_table(schema_editor)


def backward(apps, schema_editor):
    from memory import vectors

    vectors.cell_table(schema_editor, cells=False)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0010_record_metadata"),
    ]

    operations = [migrations.RunPython(forward, backward)]
