# Kept Idempotency-Key answers are indexed by the record and episode IDs they
# name, so a purge finds the ones to rewrite by index instead of searching the
# bytes of every kept answer (issue 29). Answers kept before this migration
# are indexed here once, with the engine's own reading of an answer's IDs
# (aetnaweb.purges.names_in); rows are kept until their key is used again or
# retention removes them, so they may outlive their 24 hours.

import django.db.models.deletion
from django.db import migrations, models

BATCH = 1000


def index_kept_answers(apps, schema_editor):
    from aetnaweb import purges

    IdempotencyKey = apps.get_model("access", "IdempotencyKey")
    KeptAnswerName = apps.get_model("access", "KeptAnswerName")
    db = schema_editor.connection.alias
    answers = (
        IdempotencyKey.objects.using(db)
        .filter(response_body__isnull=False)
        .order_by("pk")
        .values_list("pk", "response_body")
    )
    names = []
    for pk, body in answers.iterator(chunk_size=BATCH):
        names += [KeptAnswerName(answer_id=pk, name=n) for n in purges.names_in(bytes(body))]
        if len(names) >= BATCH:
            KeptAnswerName.objects.using(db).bulk_create(names)
            names = []
    KeptAnswerName.objects.using(db).bulk_create(names)


class Migration(migrations.Migration):
    dependencies = [
        ("access", "0002_invitation"),
    ]

    operations = [
        migrations.CreateModel(
            name="KeptAnswerName",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=64)),
                (
                    "answer",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="access.idempotencykey",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["name"], name="kept_answer_name")],
                "constraints": [
                    models.UniqueConstraint(fields=("answer", "name"), name="kept_answer_name_once")
                ],
            },
        ),
        migrations.RunPython(index_kept_answers, migrations.RunPython.noop),
    ]
