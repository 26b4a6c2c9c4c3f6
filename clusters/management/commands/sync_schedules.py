"""`manage.py sync_schedules`: make django-q2's schedules match cloudpivot/schedules.py."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone
from django_q.models import Schedule

from cloudpivot.schedules import SCHEDULES


class Command(BaseCommand):
    help = "Upsert the schedules listed in cloudpivot/schedules.py and delete the others."

    @transaction.atomic
    def handle(self, *args, **options):
        names = []
        for entry in SCHEDULES:
            fields = {key: value for key, value in entry.items() if key != "name"}
            schedule, created = Schedule.objects.update_or_create(
                name=entry["name"],
                defaults=fields | {"repeats": -1},
                create_defaults=fields | {"repeats": -1, "next_run": timezone.now()},
            )
            names.append(schedule.name)
            self.stdout.write(f"{'created' if created else 'updated'} schedule {schedule.name}")
        removed, _ = Schedule.objects.exclude(name__in=names).delete()
        if removed:
            self.stdout.write(f"removed {removed} schedules no longer listed")
