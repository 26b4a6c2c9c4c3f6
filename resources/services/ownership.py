"""The one way an instance's owner changes (an admin's decision, audited); the project never changes."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from cloudpivot.accounts.audit import audit_system
from cloudpivot.accounts.models import Membership, Role
from cloudpivot.exceptions import InvalidSpec
from resources.models import Instance


def instance_owner_change(*, instance: Instance, new_owner: AbstractBaseUser, actor: AbstractBaseUser) -> Instance:
    """Only to someone who may act on it, as for tasks: a submitter or admin of its project (a reader may not)."""
    role = Membership.objects.filter(project_id=instance.project_id, user=new_owner).values_list("role", flat=True)
    role = role.first()
    if role not in (Role.SUBMITTER, Role.ADMIN):
        where = f"project {instance.project.slug}"
        message = (
            f"{new_owner} is a reader in {where}: hand it to a submitter or admin of {where}"
            if role
            else f"{new_owner} is not a member of {where}"
        )
        raise InvalidSpec(message, errors=[{"field": "owner", "message": message}])
    with transaction.atomic():
        locked = Instance.objects.select_for_update().get(pk=instance.pk)
        before = locked.owner
        locked.owner = new_owner
        locked._owner_change = True
        locked.save(update_fields=["owner", "updated_at"])
        audit_system(
            action="resources:instance-owner-change",
            object_ref=str(locked.pk),
            details={"from": before.get_username(), "to": new_owner.get_username()},
            actor=actor,
        )
    return locked
