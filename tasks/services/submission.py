"""Submitting tasks: the document is checked, bound to one project and connection, and queued."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from cloudpivot.accounts import quotas
from cloudpivot.accounts.models import Project, Role
from cloudpivot.accounts.selectors import project_role, role_at_least
from cloudpivot.common import canonical_sha256
from cloudpivot.exceptions import Conflict, InvalidSpec, PermissionDenied
from clusters.backends import get_backend
from clusters.models import CloudConnection
from clusters.selectors import connections_visible_to
from tasks import dispatch
from tasks.models import Task
from tasks.services.lifecycle import event_append
from tasks.specs import spec_normalize


def task_submit(*, user: AbstractBaseUser, document: Any, idempotency_key: str = "") -> tuple[Task, bool]:
    """Create a PENDING task and ask for prompt admission. Returns (task, created).

    The same Idempotency-Key with the same document returns the first task; with another
    document it is a Conflict. The key's scope is the user, whichever token they use.
    """
    digest = canonical_sha256(document) if isinstance(document, dict) else ""
    if idempotency_key:
        existing = _task_for_key(user=user, key=idempotency_key, digest=digest)
        if existing:
            return existing, False
    spec = spec_normalize(document)
    connection = _connection_for(user=user, cloud_id=spec["cloud"])
    project = _project_for(user=user, connection=connection, slug=spec.get("project"))
    errors = get_backend(connection).validate(spec)
    if errors:
        raise InvalidSpec(f"invalid task document: {errors[0]['field']}: {errors[0]['message']}", errors=errors)
    quotas.check_can_ever_fit(project=project, connection_id=connection.pk, footprint=quotas.task_footprint(spec))
    spec["project"] = project.slug
    try:
        with transaction.atomic():
            task = Task.objects.create(
                project=project,
                owner=user,
                connection=connection,
                backend=connection.backend,
                name=spec.get("name") or "",
                spec=document,
                spec_sha256=digest,
                normalized=spec,
                idempotency_key=idempotency_key,
                retry_limit=spec["retry_limit"],
                timeout_seconds=spec["timeout_seconds"],
            )
            event_append(
                task=task,
                type="submitted",
                message=f"submitted by {user} to {connection.cloud_id}",
                data={"cloud": connection.cloud_id, "project": project.slug},
            )
            transaction.on_commit(dispatch.enqueue_admission)
    except IntegrityError:
        existing = _task_for_key(user=user, key=idempotency_key, digest=digest) if idempotency_key else None
        if existing is None:
            raise
        return existing, False
    return task, True


def _task_for_key(*, user: AbstractBaseUser, key: str, digest: str) -> Task | None:
    task = Task.objects.filter(owner=user, idempotency_key=key).first()
    if task is not None and task.spec_sha256 != digest:
        raise Conflict(
            "this Idempotency-Key was already used with a different task document; use a new key for a new task",
            code="idempotency_key_reused",
        )
    return task


def _connection_for(*, user: AbstractBaseUser, cloud_id: str) -> CloudConnection:
    connection = connections_visible_to(user=user).filter(cloud_id=cloud_id).first()
    if connection is None:
        available = ", ".join(connections_visible_to(user=user).values_list("cloud_id", flat=True)) or "none"
        raise InvalidSpec(
            f"unknown cloud '{cloud_id}'",
            errors=[{"field": "cloud", "message": f"unknown cloud '{cloud_id}'; clouds you may use: {available}"}],
        )
    return connection


def _project_for(*, user: AbstractBaseUser, connection: CloudConnection, slug: str | None) -> Project:
    """The named project, or the only project through which the user may submit to this connection."""
    if slug:
        project = Project.objects.filter(slug=slug).first()
        role = project_role(user=user, project=project) if project else None
        if project is None or role is None:
            raise InvalidSpec(
                f"unknown project '{slug}'",
                errors=[{"field": "project", "message": f"you are not a member of a project '{slug}'"}],
            )
        if not role_at_least(role, Role.SUBMITTER):
            raise PermissionDenied(f"your role in {slug} is {role}; submitting needs submitter or admin")
        if not connection.projects.filter(pk=project.pk).exists():
            raise InvalidSpec(
                f"project {slug} may not use cloud {connection.cloud_id}",
                errors=[{"field": "cloud", "message": f"project {slug} may not use cloud {connection.cloud_id}"}],
            )
        return project
    candidates = [
        p for p in connection.projects.all() if role_at_least(project_role(user=user, project=p), Role.SUBMITTER)
    ]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise PermissionDenied(f"none of your projects lets you submit to {connection.cloud_id}")
    names = ", ".join(p.slug for p in candidates)
    raise InvalidSpec(
        "name a project",
        errors=[
            {
                "field": "project",
                "message": f"you may submit to {connection.cloud_id} through several projects ({names}); name one",
            }
        ],
    )
