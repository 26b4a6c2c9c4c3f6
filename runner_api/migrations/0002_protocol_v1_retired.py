"""No schema change: the time this migration is applied is when protocol v1 stopped being handed out
(runner_api/protocol_v1.py). Attempts started before it may go on speaking v1 until they end."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("runner_api", "0001_initial")]

    operations: list = []
