"""Quotas: admission is a queue (with the reason and the place), never-fitting requests are refused."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import close_old_connections, transaction

from cloudpivot.accounts.models import Quota
from tasks.models import Task
from tasks.services.admission import admit_all
from tasks.services.attempts import attempt_close, current_attempt
from tasks.services.lifecycle import task_lock
from tasks.services.submission import task_submit
from tests.builders import hello_spec


def submit(world, user=None, **extra) -> Task:
    return task_submit(user=user or world.bob, document=hello_spec(**extra))[0]


def finish(task: Task) -> None:
    with transaction.atomic():
        locked = task_lock(task.pk)
        attempt_close(task=locked, attempt=current_attempt(locked), outcome="SUCCEEDED", reason="done")


def states(tasks: list[Task]) -> list[str]:
    return [Task.objects.get(pk=t.pk).state for t in tasks]


def test_a_task_that_can_never_fit_is_refused_at_submission(api, world):
    Quota.objects.create(project=world.alpha, connection=world.local, max_vcpu=2)
    response = api("bob").post(
        "/api/v1/tasks", data=json.dumps(hello_spec(resources={"cpu": 4})), content_type="application/json"
    )
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "quota_exceeded" and body["errors"][0]["field"] == "resources.cpu"
    assert "asks 4 vCPU" in body["message"] and "at most 2" in body["message"] and "alpha" in body["message"]
    assert (body["resource"], body["asked"], body["limit"]) == ("vcpu", "4", "2")
    assert Task.objects.count() == 0


def test_tasks_over_quota_wait_in_order_with_the_reason_and_their_place(api, world):
    Quota.objects.create(project=world.alpha, connection=world.local, max_tasks=2)
    tasks = [submit(world, name=f"t{i}") for i in range(4)]
    assert admit_all() == 2
    assert states(tasks) == ["SUBMITTING", "SUBMITTING", "PENDING", "PENDING"]
    waiting = api("bob").get(f"/api/v1/tasks/{tasks[2].pk}").json()
    assert waiting["state_reason"] == "waiting: project alpha quota on local: 2/2 tasks in use"
    assert waiting["queue_position"] == 1
    assert api("bob").get(f"/api/v1/tasks/{tasks[3].pk}").json()["queue_position"] == 2
    assert Task.objects.get(pk=tasks[2].pk).events.filter(type="waiting").count() == 1
    assert admit_all() == 0  # still full; the reason is not written again
    assert Task.objects.get(pk=tasks[2].pk).events.filter(type="waiting").count() == 1
    finish(tasks[0])
    assert admit_all() == 1
    assert states(tasks) == ["SUCCEEDED", "SUBMITTING", "SUBMITTING", "PENDING"]


def test_a_project_wide_quota_counts_every_connection_and_other_projects_are_not_held(world):
    Quota.objects.create(project=world.alpha, max_vcpu=3)
    big = submit(world, resources={"cpu": 2})
    small = submit(world, resources={"cpu": 2})
    later = submit(world, resources={"cpu": 0.5})
    other = submit(world, user=world.charlie, resources={"cpu": 8})
    admit_all()
    assert states([big, small, later, other]) == ["SUBMITTING", "PENDING", "PENDING", "SUBMITTING"]
    # First in, first admitted: the small task behind the waiting one waits too.
    assert Task.objects.get(pk=later.pk).state_reason.startswith("waiting: project alpha quota on all clouds")


@pytest.mark.django_db(transaction=True)
def test_parallel_submissions_and_admissions_never_overshoot_the_quota(world):
    Quota.objects.create(project=world.alpha, connection=world.local, max_tasks=5)
    holding = ["SUBMITTING", "STARTING", "RUNNING"]
    peak, errors, done = [0], [], threading.Event()

    def in_thread(work):
        def run():
            try:
                work()
            except Exception as exc:  # reported below, so a failing thread fails the test
                errors.append(exc)
            finally:
                close_old_connections()

        return threading.Thread(target=run)

    def admit_loop():
        while not done.is_set():
            admit_all()
            peak[0] = max(peak[0], Task.objects.filter(state__in=holding).count())
            done.wait(0.01)

    submitters = [in_thread(lambda: submit(world)) for _ in range(30)]
    admitters = [in_thread(admit_loop) for _ in range(3)]
    for thread in admitters + submitters:
        thread.start()
    for thread in submitters:
        thread.join()
    admit_all()
    done.set()
    for thread in admitters:
        thread.join()
    assert not errors, errors
    assert Task.objects.count() == 30
    assert Task.objects.filter(state__in=holding).count() == 5
    assert peak[0] <= 5
    assert Task.objects.filter(state="PENDING").count() == 25
