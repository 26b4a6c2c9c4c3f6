"""Project secrets: saved by project admins, named by task documents, opened only to deliver them to a run.

A value is encrypted before it is saved (cloudpivot.secret_box) and never read back for people: the API,
the admin and the pages show a secret's name, dates and who saved it. The values are opened in two places
only: the Runner's or host agent's assignment and the Kubernetes Secret of an attempt (`secret_values`),
and the log ingestion that masks them (`secret_values` again).
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from cloudpivot import secret_box
from cloudpivot.accounts.models import Project, ProjectSecret, Role, secret_name_validator
from cloudpivot.accounts.selectors import project_role, role_at_least
from cloudpivot.exceptions import Conflict, InvalidSpec, NotFound, PermissionDenied

logger = logging.getLogger(__name__)
MAX_VALUE_BYTES = 64 * 1024


# ---------------------------------------------------------------------------- reads
def project_secrets(*, project: Project) -> QuerySet[ProjectSecret]:
    """The project's secrets, for listing: never their values (the token is deferred, never sent)."""
    return project.secrets.defer("value_encrypted").select_related("created_by", "updated_by")


def secret_for_update(*, project: Project, name: str) -> ProjectSecret:
    secret = project.secrets.filter(name=name).first()
    if secret is None:
        raise NotFound(f"project {project.slug} has no secret named {name!r}")
    return secret


def secret_reference_errors(*, project_id: int, references: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The task document's `secrets` entries that name no secret of the project, as field errors."""
    names = {ref["name"] for ref in references}
    known = set(ProjectSecret.objects.filter(project_id=project_id, name__in=names).values_list("name", flat=True))
    return [
        {"field": f"secrets.{index}.name", "message": f"the project has no secret named {ref['name']!r}"}
        for index, ref in enumerate(references)
        if ref["name"] not in known
    ]


def secret_references_check(*, project_id: int, references: list[dict[str, Any]]) -> None:
    """Raise InvalidSpec (400) naming the first `secrets.N.name` that is not a secret of the project."""
    errors = secret_reference_errors(project_id=project_id, references=references)
    if errors:
        raise InvalidSpec(f"invalid task document: {errors[0]['field']}: {errors[0]['message']}", errors=errors)


def secret_values(*, project_id: int, names: list[str]) -> dict[str, str | None]:
    """name → plain value of the named secrets that exist (a deleted one is absent; None: the configured
    CLOUDPIVOT_SECRETS_KEY cannot open it, e.g. the key was replaced without keeping the old one)."""
    if not names:
        return {}
    rows = ProjectSecret.objects.filter(project_id=project_id, name__in=set(names)).values_list(
        "name", "value_encrypted"
    )
    values: dict[str, str | None] = {}
    for name, token in rows:
        try:
            values[name] = secret_box.decrypt(token)
        except secret_box.SecretUnreadable:
            logger.error(
                "project secret %r of project %s cannot be decrypted with CLOUDPIVOT_SECRETS_KEY", name, project_id
            )
            values[name] = None
    return values


# ---------------------------------------------------------------------------- writes
def _require_admin(*, user: AbstractBaseUser, project: Project) -> None:
    role = project_role(user=user, project=project)
    if role is None:
        raise NotFound(f"no project {project.slug}")
    if not role_at_least(role, Role.ADMIN):
        raise PermissionDenied(f"your role in {project.slug} is {role}; project secrets are managed by its admins")


def _checked_value(value: Any) -> str:
    if not isinstance(value, str) or value == "":
        raise InvalidSpec("value: must be a non-empty string", errors=[{"field": "value", "message": "required"}])
    if len(value.encode()) > MAX_VALUE_BYTES:
        message = f"at most {MAX_VALUE_BYTES} bytes"
        raise InvalidSpec(f"value: {message}", errors=[{"field": "value", "message": message}])
    return value


def _checked_name(name: Any) -> str:
    try:
        secret_name_validator(name if isinstance(name, str) else "")
    except ValidationError as exc:
        raise InvalidSpec(f"name: {exc.messages[0]}", errors=[{"field": "name", "message": exc.messages[0]}]) from None
    return name


def secret_create(*, user: AbstractBaseUser, project: Project, name: str, value: str) -> ProjectSecret:
    _require_admin(user=user, project=project)
    name = _checked_name(name)
    secret = ProjectSecret(
        project=project,
        name=name,
        value_encrypted=secret_box.encrypt(_checked_value(value)),
        created_by=user,
        updated_by=user,
    )
    try:
        with transaction.atomic():
            secret.save()
    except IntegrityError:
        message = f"project {project.slug} already has a secret named {name!r}; replace its value with PUT"
        raise Conflict(message, errors=[{"field": "name", "message": message}], code="already_exists") from None
    return secret


def secret_update(*, user: AbstractBaseUser, project: Project, name: str, value: str) -> ProjectSecret:
    _require_admin(user=user, project=project)
    secret = secret_for_update(project=project, name=name)
    secret.value_encrypted = secret_box.encrypt(_checked_value(value))
    secret.updated_by = user
    secret.save(update_fields=["value_encrypted", "updated_by", "updated_at"])
    return secret


def secret_delete(*, user: AbstractBaseUser, project: Project, name: str) -> None:
    _require_admin(user=user, project=project)
    secret_for_update(project=project, name=name).delete()
