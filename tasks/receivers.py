"""Signals the tasks app listens to: a project's grant on a connection is removed → its tasks there stop.

An interface (like jobs and admin): it parses the signal and calls one service. `m2m_changed` covers
every way the grant goes through the ORM: the connection's admin page (*Projects*), a project's
`connections`, `clear()`, the shell.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import m2m_changed

from clusters.models import CloudConnection
from tasks.services.actions import tasks_stop_for_withdrawn_grant

GRANTS = CloudConnection.projects.through


def grant_withdrawn(
    *, sender: Any, instance: Any, action: str, reverse: bool, pk_set: set[Any] | None, **kwargs: Any
) -> None:
    if action == "pre_clear":
        # clear() does not say which grants go; every grant of `instance` goes, in this same transaction.
        sides = ("cloudconnection_id", "project_id")
        owner, other_side = sides if not reverse else sides[::-1]
        pk_set = set(GRANTS.objects.filter(**{owner: instance.pk}).values_list(other_side, flat=True))
    elif action != "post_remove":
        return
    for other in pk_set or ():
        connection_id, project_id = (instance.pk, other) if not reverse else (other, instance.pk)
        tasks_stop_for_withdrawn_grant(connection_id=connection_id, project_id=project_id)


def connect() -> None:
    m2m_changed.connect(grant_withdrawn, sender=GRANTS, dispatch_uid="cloudpivot-tasks-grant-withdrawn")
