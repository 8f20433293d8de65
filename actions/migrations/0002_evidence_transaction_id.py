"""``action_evidence.transaction_id``: the column the published schema has.

Added nullable, filled from each row's operation, then made required, so a
database with evidence rows migrates without a default that would be wrong.
"""

from __future__ import annotations

from typing import Any

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def fill_transaction_id(apps: Any, schema_editor: Any) -> None:
    evidence = apps.get_model("actions", "ActionEvidence")
    operation = apps.get_model("actions", "ActionOperation")
    owner = operation.objects.filter(pk=OuterRef("operation_id")).values("transaction_id")[:1]
    evidence.objects.filter(transaction__isnull=True).update(transaction_id=Subquery(owner))


class Migration(migrations.Migration):
    dependencies = [("actions", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="actionevidence",
            name="transaction",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="evidence",
                to="actions.actiontransaction",
            ),
        ),
        migrations.RunPython(fill_transaction_id, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="actionevidence",
            name="transaction",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="evidence",
                to="actions.actiontransaction",
            ),
        ),
    ]
