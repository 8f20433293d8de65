"""The vector index for semantic recall (see memory/vectors.py).

SQLite: a sqlite-vec ``vec0`` table partitioned by scope. PostgreSQL: a
pgvector table with an HNSW index, if the server has pgvector installed.
An engine without vector support skips this step (recall stays lexical).
Existing records get their vectors from ``manage.py memory reindex``:
embedding a large store is too slow for a migration.
"""

from django.db import migrations


def forward(apps, schema_editor):
    from memory import vectors

    vectors.create_table(schema_editor)


def backward(apps, schema_editor):
    from memory import vectors

    vectors.drop_table(schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0005_fulltext_secure_delete"),
    ]

    operations = [migrations.RunPython(forward, backward)]
