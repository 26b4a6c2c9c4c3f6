"""OrphanFinding now belongs to the orphans app (orphans/migrations/0001_initial.py): state only, no table change."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("resources", "0003_operation_instance_protect"),
        ("orphans", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="OrphanFinding")],
            database_operations=[],
        ),
    ]
