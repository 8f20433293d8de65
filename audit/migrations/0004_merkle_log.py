"""The global Merkle log (issue 14): leaf, node and state tables, backfilled.

Every event already in ``audit_log`` becomes a leaf, in sequence order, so a
database that predates the log gets the same tree it would have had.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


def backfill(apps: Any, schema_editor: Any) -> None:
    from audit import tree  # plain SQL over the tables this migration created

    tree.integrate_pending()


class Migration(migrations.Migration):
    dependencies = [("audit", "0003_daily_count_covering_index")]

    operations = [
        migrations.CreateModel(
            name="AuditTreeLeaf",
            fields=[
                ("leaf_index", models.BigIntegerField(primary_key=True, serialize=False)),
                ("sequence", models.BigIntegerField(unique=True)),
                ("leaf_hash", models.CharField(max_length=64)),
            ],
            options={"db_table": "audit_tree_leaf", "ordering": ["leaf_index"]},
        ),
        migrations.CreateModel(
            name="AuditTreeNode",
            fields=[
                ("node_id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("hash", models.CharField(max_length=64)),
            ],
            options={"db_table": "audit_tree_node"},
        ),
        migrations.CreateModel(
            name="AuditTreeState",
            fields=[
                (
                    "id",
                    models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False),
                ),
                ("size", models.BigIntegerField(default=0)),
                ("frontier", models.TextField(blank=True, default="")),
            ],
            options={"db_table": "audit_tree_state"},
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
