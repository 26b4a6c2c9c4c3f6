"""The dispatch switch is said once: each waiting task says dispatch holds it when it comes to wait on a connection
with dispatch off (submitted, retried) or when the admin turns dispatch off, and goes back to waiting for its turn
when dispatch comes on again; no admission pass looks at a connection with dispatch off."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from clusters.models import CloudConnection
from tasks.models import Task, TaskEvent
from tasks.services import admission, task_retry
from tasks.services.admission import admit_all, connection_admit, connection_dispatch_said
from tests.builders import finished, submit

OFF = "waiting: dispatch is off on the local cloud until an admin turns it on"
ON_AGAIN = "dispatch is on again on the local cloud: waiting for admission"


@pytest.fixture
def root(client, world):
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "pw-root"))
    return client


def switch(root, world, *, on: bool) -> None:
    """Save the local connection in the admin with dispatch on or off."""
    form = {
        "cloud_id": "local",
        "name": world.local.name,
        "backend": "local",
        "max_active_tasks": "0",
        "projects": [str(world.alpha.pk), str(world.beta.pk)],
        "endpoint": "",
        "scope": "",
        "credentials_ref": "",
        "options": json.dumps(world.local.options),
    } | ({"dispatch_enabled": "on"} if on else {})
    response = root.post(f"/admin/clusters/cloudconnection/{world.local.pk}/change/", form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert CloudConnection.objects.get(pk=world.local.pk).dispatch_enabled is on


def waiting_events(task: Task) -> list[str]:
    return list(TaskEvent.objects.filter(task=task, type="waiting").order_by("seq").values_list("message", flat=True))


def test_a_task_submitted_while_dispatch_is_off_says_so_from_the_start_and_no_pass_looks_at_it(
    world, django_assert_num_queries
):
    CloudConnection.objects.filter(pk=world.local.pk).update(dispatch_enabled=False)
    task = submit(world.bob)
    assert task.state_reason == OFF and Task.objects.get(pk=task.pk).state_reason == OFF
    assert list(task.events.order_by("seq").values_list("seq", "type")) == [(1, "submitted"), (2, "waiting")]
    assert Task.objects.get(pk=task.pk).last_event_seq == 2
    with django_assert_num_queries(1):  # the connections with work: none (no lock, no queue read, no write)
        assert admit_all() == 0
    assert connection_admit(connection_id=world.local.pk) == 0
    assert waiting_events(task) == [OFF]  # said once


def test_the_admin_turning_dispatch_off_tells_every_waiting_task_once_and_turning_it_on_puts_them_back(
    root, world, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(admission, "REASON_BATCH", 25)  # 60 tasks: three batches
    tasks = [submit(world.bob, name=f"t{i}") for i in range(55)] + [submit(world.charlie) for _ in range(5)]
    with django_capture_on_commit_callbacks(execute=True):
        switch(root, world, on=False)
    # Every waiting task, not only the 50 oldest of each owner that admission looks at.
    assert set(Task.objects.values_list("state_reason", flat=True)) == {OFF}
    assert all(waiting_events(task) == [OFF] for task in tasks)
    assert connection_dispatch_said(connection_id=world.local.pk) == 0  # nothing more to say
    late = submit(world.bob, name="late")
    assert late.state_reason == OFF

    with django_capture_on_commit_callbacks(execute=True):
        switch(root, world, on=True)
    assert set(Task.objects.values_list("state_reason", flat=True)) == {""}
    assert all(waiting_events(task) == [OFF, ON_AGAIN] for task in [*tasks, late])
    assert admit_all() == 55  # the 50 oldest of bob's, charlie's 5


def test_dispatch_turned_on_outside_the_admin_is_noticed_by_the_next_admission(
    root, world, django_capture_on_commit_callbacks
):
    tasks = [submit(world.bob, name=f"t{i}") for i in range(55)]
    with django_capture_on_commit_callbacks(execute=True):
        switch(root, world, on=False)
    CloudConnection.objects.filter(pk=world.local.pk).update(dispatch_enabled=True)  # a shell, say
    with django_capture_on_commit_callbacks(execute=True):
        assert connection_admit(connection_id=world.local.pk) == 50  # the 50 oldest, as ever
    tail = Task.objects.filter(state="PENDING")
    assert tail.count() == 5 and set(tail.values_list("state_reason", flat=True)) == {""}
    assert waiting_events(tasks[-1]) == [OFF, ON_AGAIN]


def test_a_task_retried_while_dispatch_is_off_says_so(world):
    task = finished(world.bob, exit_code=3)
    CloudConnection.objects.filter(pk=world.local.pk).update(dispatch_enabled=False)
    retried = task_retry(task_id=task.pk, user=world.bob)
    assert retried.state == "PENDING" and retried.state_reason == OFF
    assert Task.objects.get(pk=task.pk).state_reason == OFF and waiting_events(task) == [OFF]
