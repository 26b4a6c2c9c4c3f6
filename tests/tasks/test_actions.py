"""Who may cancel, retry and hand over a task is decided by the service, whichever interface calls it."""

from __future__ import annotations

import pytest

from cloudpivot.exceptions import PermissionDenied
from tasks.services import task_cancel, task_change_owner, task_retry
from tasks.services.submission import task_submit
from tests.builders import hello_spec


def test_readers_and_outsiders_cannot_cancel_and_submitters_only_their_own(world):
    bobs = task_submit(user=world.bob, document=hello_spec())[0]
    for user in (world.rita, world.charlie):
        with pytest.raises(PermissionDenied):
            task_cancel(task_id=bobs.pk, user=user)
    alices = task_submit(user=world.alice, document=hello_spec())[0]
    with pytest.raises(PermissionDenied) as refused:
        task_cancel(task_id=alices.pk, user=world.bob)
    assert refused.value.message == "your role in alpha (submitter) does not allow this on another user's task"
    assert task_cancel(task_id=bobs.pk, user=world.bob).state == "CANCELLED"
    with pytest.raises(PermissionDenied) as refused:
        task_retry(task_id=bobs.pk, user=world.rita)
    assert refused.value.message == "your role in alpha is reader; cancel and retry need submitter or admin"
    assert task_retry(task_id=bobs.pk, user=world.alice).state == "PENDING"  # a project admin acts on any task


def test_only_a_project_admin_hands_a_task_to_someone_else(world):
    task = task_submit(user=world.bob, document=hello_spec())[0]
    with pytest.raises(PermissionDenied, match="only an admin of alpha"):
        task_change_owner(task_id=task.pk, new_owner=world.alice, actor=world.bob)
    assert task_change_owner(task_id=task.pk, new_owner=world.alice, actor=world.alice).owner == world.alice
