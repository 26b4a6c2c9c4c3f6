"""A retry with changes of an OpenStack task (issue 34): the image id the cloud's check pinned in the spec is
not a field of the document, so it is pinned again for the changed document, never a 400."""

from __future__ import annotations

import pytest

from tasks.models import Task
from tasks.services.actions import task_cancel
from tasks.services.submission import task_submit

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_an_openstack_task_is_retried_with_changes_and_its_image_pinned_again(os_live, api):
    bob = os_live.world.bob
    task, _ = task_submit(user=bob, document={"cloud": "os-dev", "command": ["true"], "timeout_seconds": 30})
    pinned = task.normalized["image_id"]
    task_cancel(task_id=task.pk, user=bob)  # still PENDING: cancelled at once, nothing in the cloud
    wrong = api("bob").post(f"/api/v1/tasks/{task.pk}/retry", {"changes": {"image_id": "x"}}, format="json")
    assert wrong.status_code == 400 and wrong.json()["errors"][0]["field"] == "image_id"  # a pin is not a field
    response = api("bob").post(f"/api/v1/tasks/{task.pk}/retry", {"changes": {"timeout_seconds": 600}}, format="json")
    assert response.status_code == 202, response.json()
    task = Task.objects.get(pk=task.pk)
    assert task.normalized["timeout_seconds"] == 600 and task.normalized["image_id"] == pinned
