"""SQLite: the vector index scans 1-bit vectors and re-ranks with the float ones.

sqlite-vec's KNN is a brute-force scan of every vector in the visible
partitions; scanning 48-byte sign vectors instead of 1,536-byte float ones is
what keeps recall fast in a scope of 100,000 records (see memory/vectors.py).
Stored vectors are kept and quantised, nothing is re-embedded. PostgreSQL is
unchanged (its HNSW index is already sub-linear).
"""

from django.db import migrations


def forward(apps, schema_editor):
    from memory import vectors

    vectors.quantise_table(schema_editor)


def backward(apps, schema_editor):
    from memory import vectors

    vectors.quantise_table(schema_editor, coarse=False)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0008_review_reasons"),
    ]

    operations = [migrations.RunPython(forward, backward)]
