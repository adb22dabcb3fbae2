"""JobLog moves to crawls (crawls/migrations/0015_joblog_from_ops.py): ops forgets it, the table stays."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0002_cleanup_periodic"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="JobLog")]),
    ]
