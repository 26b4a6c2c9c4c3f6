"""OrphanFinding moves here from the resources app: Django's state only, the table (resources_orphanfinding)
and its rows stay. The content type is renamed so admin permissions and log entries follow the model.
"""

import django.db.models.deletion
from django.db import migrations, models


def content_type_to(app_label: str, from_label: str):
    def move(apps, schema_editor):
        content_types = apps.get_model("contenttypes", "ContentType").objects.using(schema_editor.connection.alias)
        if content_types.filter(app_label=app_label, model="orphanfinding").exists():
            return
        content_types.filter(app_label=from_label, model="orphanfinding").update(app_label=app_label)

    return move


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("clusters", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("resources", "0003_operation_instance_protect"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="OrphanFinding",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "kind",
                            models.CharField(
                                help_text="server, image, volume, job, vm, vm_snapshot or data_volume", max_length=16
                            ),
                        ),
                        (
                            "ref",
                            models.CharField(help_text="The cloud's id (a Job: its name in the namespace).", max_length=255),
                        ),
                        (
                            "uid",
                            models.CharField(blank=True, help_text="Kubernetes uid (a delete precondition).", max_length=64),
                        ),
                        ("name", models.CharField(blank=True, max_length=255)),
                        (
                            "category",
                            models.CharField(
                                choices=[
                                    ("orphan", "Orphan (tagged, unknown to CloudPivot)"),
                                    ("stale", "Stale (deleted/closed in CloudPivot, still in the cloud)"),
                                    ("missing", "Missing (expected by CloudPivot, not in the cloud)"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("reason", models.TextField(blank=True)),
                        ("protected_reason", models.TextField(blank=True, help_text="Not empty: listed, never deleted.")),
                        ("evidence", models.JSONField(blank=True, default=dict)),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("open", "Open"),
                                    ("deleted", "Deleted (asked the cloud)"),
                                    ("adopted", "Adopted"),
                                    ("needs_cleanup", "Needs cleanup (a delete failed)"),
                                    ("resolved", "Resolved (no longer found)"),
                                ],
                                default="open",
                                max_length=16,
                            ),
                        ),
                        ("error", models.TextField(blank=True, help_text="The last failed action's error (needs_cleanup).")),
                        ("first_seen_at", models.DateTimeField()),
                        ("last_seen_at", models.DateTimeField()),
                        ("acted_at", models.DateTimeField(blank=True, null=True)),
                        ("resolved_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "connection",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="orphan_findings",
                                to="clusters.cloudconnection",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "resources_orphanfinding",
                        "ordering": ["-last_seen_at", "-id"],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("connection", "kind", "ref"), name="resources_orphanfinding_unique_ref"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_type_to("orphans", "resources"), content_type_to("resources", "orphans")),
    ]
