"""`manage.py audit_spill`: how many audit entries wait in the spill file; `--load` writes them to the database."""

from django.core.management.base import BaseCommand

from cloudpivot.accounts.audit import audit_spill_load, spilled_audit_entries


class Command(BaseCommand):
    help = "Count the audit entries the database did not take (the spill file), or load them with --load."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--load", action="store_true", help="write the spilled entries to the database")

    def handle(self, *args, load: bool, **options) -> None:
        if load:
            self.stdout.write(f"loaded {audit_spill_load()} spilled audit entries")
        else:
            self.stdout.write(f"{spilled_audit_entries()} audit entries wait in the spill file")
