"""`manage.py qcluster`: django-q2's command, stopped within WORKER_STOP_SECONDS of a SIGTERM or SIGINT
(cloudpivot/workers/stop.py says why django-q2's own stop may never end)."""

from __future__ import annotations

import os

from django.conf import settings
from django.core.management.base import CommandError
from django_q.management.commands.qcluster import Command as DjangoQCommand

from cloudpivot.workers.stop import BoundedCluster


class Command(DjangoQCommand):
    def handle(self, *args, **options):
        settings.SECRET_KEY  # noqa: B018 - as django-q2's: no cluster without the signing key
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        cluster = BoundedCluster()
        try:
            cluster.start()
        except RuntimeError:  # the sentinel died while starting: quietly so when a stop was asked for
            if not cluster.stop_requested.is_set():
                raise
        if options.get("run_once"):
            cluster.stop_requested.set()
        if not cluster.run_until_stopped(settings.WORKER_STOP_SECONDS):
            raise CommandError(f"the qcluster's sentinel ended by itself (exit code {cluster.sentinel.exitcode})")
