from __future__ import annotations

from django.core.management import call_command
from django.utils.module_loading import import_string
from django_q.models import Schedule

from cloudpivot.schedules import SCHEDULES


def test_every_scheduled_function_imports():
    for entry in SCHEDULES:
        assert callable(import_string(entry["func"])), entry["name"]


def test_sync_schedules_upserts_the_list_and_removes_the_rest(db):
    Schedule.objects.create(name="stale", func="os.getcwd", schedule_type="H")
    call_command("sync_schedules")
    call_command("sync_schedules")
    assert sorted(Schedule.objects.values_list("name", flat=True)) == sorted(e["name"] for e in SCHEDULES)
