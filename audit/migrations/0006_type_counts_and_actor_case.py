from __future__ import annotations

from typing import Any

import django.db.models.functions.text
from django.db import migrations, models


def count_existing_events(apps: Any, schema_editor: Any) -> None:
    """Fill the per-type counters from the events already in ``audit_log`` (once)."""
    event = apps.get_model("audit", "AuditEvent")
    type_count = apps.get_model("audit", "AuditTypeCount")
    per_type = (
        event.objects.order_by()
        .values("subject_id", "event_type")
        .annotate(total=models.Count("sequence"))
    )
    type_count.objects.bulk_create(
        (
            type_count(
                subject_id=row["subject_id"],
                event_type=row["event_type"],
                event_count=row["total"],
            )
            for row in per_type.iterator(chunk_size=2000)
        ),
        batch_size=1000,
    )


class Migration(migrations.Migration):
    """The explorer's event-type picker counts from a counter table, and actors
    match case-insensitively on an UPPER(actor) index."""

    dependencies = [
        ("audit", "0005_checkpoint_log_head"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditTypeCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("subject_id", models.CharField(max_length=200)),
                ("event_type", models.CharField(max_length=100)),
                ("event_count", models.PositiveBigIntegerField(default=0)),
            ],
            options={
                "db_table": "audit_type_count",
                "ordering": ["subject_id", "event_type"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("subject_id", "event_type"), name="audit_type_count_subject_type"
                    )
                ],
            },
        ),
        migrations.AddIndex(
            model_name="auditevent",
            index=models.Index(
                django.db.models.functions.text.Upper("actor"),
                models.F("sequence"),
                name="audit_actor_upper_seq",
            ),
        ),
        migrations.RunPython(count_existing_events, migrations.RunPython.noop),
    ]
