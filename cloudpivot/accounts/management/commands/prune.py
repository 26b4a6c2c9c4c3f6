"""`manage.py prune`: apply the retention settings now (the daily `retention` schedule does the same)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from cloudpivot.retention import KINDS, prune


class Command(BaseCommand):
    help = "Archive, then delete, finished tasks, audit entries and operations past their retention."

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="Only count what would go.")

    def handle(self, *args, dry_run: bool, **options):
        done = prune(dry_run=dry_run)
        verb = "would archive and delete" if dry_run else "archived and deleted"
        for kind in KINDS:
            if kind.name in done:
                self.stdout.write(f"{kind.name}: {verb} {done[kind.name]}")
            else:
                self.stdout.write(f"{kind.name}: kept for ever (its retention is 0 days)")
