"""`manage.py rotate_secrets_key`: re-encrypt every project secret and webhook signing secret under the first
CLOUDPIVOT_SECRETS_KEY.

Rotation: put the new key first (`CLOUDPIVOT_SECRETS_KEY=new,old`), restart, run this, then drop the old key.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from cloudpivot import secret_box
from cloudpivot.accounts.models import ProjectSecret
from notifications.webhooks import webhook_secrets_reencrypt


class Command(BaseCommand):
    help = "Re-encrypt every project secret under the first key of CLOUDPIVOT_SECRETS_KEY (values are never printed)."

    def handle(self, *args, **options):
        done, unreadable = 0, []
        for secret in ProjectSecret.objects.select_related("project").iterator():
            try:
                token = secret_box.rotate(secret.value_encrypted)
            except secret_box.SecretUnreadable:
                unreadable.append(str(secret))
                continue
            ProjectSecret.objects.filter(pk=secret.pk).update(value_encrypted=token)
            done += 1
        self.stdout.write(f"re-encrypted {done} project secrets under the first key")
        done, unopened = webhook_secrets_reencrypt()
        unreadable += unopened
        self.stdout.write(f"re-encrypted the signing secrets of {done} webhook endpoints under the first key")
        if unreadable:
            raise CommandError(f"no configured key opens: {', '.join(unreadable)}")
