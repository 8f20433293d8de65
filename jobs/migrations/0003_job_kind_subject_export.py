from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0002_job_kind_erasure'),
    ]

    operations = [
        migrations.AlterField(
            model_name='job',
            name='kind',
            field=models.CharField(choices=[('export', 'Audit export'), ('reindex', 'Semantic reindex'), ('retention', 'Retention run'), ('erasure', 'Subject erasure'), ('subject_export', 'Subject export')], max_length=16),
        ),
    ]
