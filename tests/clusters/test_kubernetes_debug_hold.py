"""Debug hold on Kubernetes, through the API: a failed attempt's pod is kept (its `debug` container up), the
attempt says how to get in, the hold counts against quota and is audited, and the pod goes when the hold
expires or is released. The real client talks to the loopback kmock server; the test plays the kubelet.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django_q.conf import Conf

from cloudpivot.accounts.models import AuditEntry, Quota
from tasks.models import Attempt, Task
from tasks.selectors import task_quota_usage
from tasks.services import reconcile_pass
from tasks.services.reconcile import cleanups_pending, reconcile_due_at
from tests import helpers
from tests.clusters.debug_hold import failed_and_held, job_name, submit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def held_cloud(kube_connection, monkeypatch):
    """k3s-lab allowing debug holds of up to 30 minutes; jobs (the stop) run inline."""
    monkeypatch.setattr(Conf, "SYNC", True)
    kube_connection.options = kube_connection.options | {"debug_hold_max_minutes": 30}
    kube_connection.save()
    return kube_connection


def attempts(api, task: Task, user: str = "bob") -> list[dict]:
    response = api(user).get(f"/api/v1/tasks/{task.pk}/attempts")
    assert response.status_code == 200
    return response.json()["attempts"]


def test_the_job_asks_for_a_debug_container_that_outlives_a_failure(kube, held_cloud, world, api):
    task = submit(api, debug_hold_minutes=20, timeout_seconds=600, workdir="/work")
    reconcile_pass()
    spec = kube.jobs()[job_name(task)]["spec"]
    main, debug = spec["template"]["spec"]["containers"]
    assert main["command"][:2] == ["/bin/sh", "-c"]
    assert main["command"][3:] == ["cloudpivot-task", "python3", "-c", "boom()"]  # the argv, literally
    assert debug["name"] == "debug" and debug["image"] == "python:3.12-slim" and debug["workingDir"] == "/work"
    assert "sleep 1200" in debug["command"][2]
    assert {"name": "cloudpivot-hold", "emptyDir": {"sizeLimit": "1Mi"}} in spec["template"]["spec"]["volumes"]
    # the Job controller must not kill a held pod: the deadline is the timeout plus the hold
    assert spec["activeDeadlineSeconds"] == 600 + 1200 + 60


def test_a_failed_pod_is_kept_with_the_kubectl_line_then_removed_when_the_hold_ends(kube, held_cloud, world, api):
    task, name = failed_and_held(kube, api)
    assert task.state == "FAILED" and task.exit_code == 3, task.state_reason
    pod = kube.pod(name)["metadata"]["name"]

    for _ in range(3):  # passes (or a restarted worker) leave the held Job alone: the hold is in the database
        reconcile_pass()
    assert name in kube.jobs()
    hold = attempts(api, task)[0]["debug_hold"]
    assert hold["active"] is True and hold["released_at"] is None
    assert hold["how_to_get_in"]["command"] == f"kubectl exec -n tasks -it {pod} -c debug -- sh"
    assert hold["how_to_get_in"]["pod"] == pod and hold["how_to_get_in"]["namespace"] == "tasks"
    attempt = Attempt.objects.get(task=task)
    until = dt.datetime.fromisoformat(hold["until"].replace("Z", "+00:00"))
    assert abs((until - (attempt.closed_at + dt.timedelta(minutes=20))).total_seconds()) < 1
    # the ticker wakes for it: the next pass is due when the hold ends, not before
    due = reconcile_due_at(last_pass=None)
    assert due is not None and abs((due - attempt.hold_until).total_seconds()) < 1
    assert task.events.filter(type="debug_hold", data__attempt=1).exists()
    started = AuditEntry.objects.get(action="tasks:debug-hold-started")
    assert started.object_ref == name and started.details["minutes"] == 20

    assert cleanups_pending(now=attempt.hold_until - dt.timedelta(seconds=1)) == 0
    assert name in kube.jobs()
    assert cleanups_pending(now=attempt.hold_until + dt.timedelta(seconds=1)) == 1
    assert name not in kube.jobs()
    attempt.refresh_from_db()
    assert attempt.cleanup_state == "done"
    assert AuditEntry.objects.filter(action="tasks:debug-hold-expired", object_ref=name).count() == 1
    assert task.events.filter(type="debug_hold_expired").count() == 1
    hold = attempts(api, task)[0]["debug_hold"]
    assert hold["active"] is False and hold["how_to_get_in"] is None


def test_release_removes_the_pod_at_once_owner_or_admin_only(kube, held_cloud, world, api):
    task, name = failed_and_held(kube, api)
    url = f"/api/v1/tasks/{task.pk}/release-hold"
    refused = api("rita").post(url)  # a reader
    assert refused.status_code == 403, refused.json()
    assert name in kube.jobs()

    response = api("alice").post(url)  # a project admin may release another user's hold
    assert response.status_code == 200, response.json()
    assert response.json()["released"] == [1]
    reconcile_pass()
    assert name not in kube.jobs()
    hold = attempts(api, task)[0]["debug_hold"]
    assert hold["active"] is False and hold["released_by"] == "alice" and hold["released_at"]
    assert AuditEntry.objects.filter(action="tasks:debug-hold-released", actor=world.alice).count() == 1
    assert AuditEntry.objects.filter(action="tasks-api:task-release-hold", actor=world.alice, outcome="ok").exists()
    assert not AuditEntry.objects.filter(action="tasks:debug-hold-expired").exists()  # released, not expired
    again = api("bob").post(url)
    assert again.status_code == 409 and again.json()["code"] == "no_debug_hold"


def test_a_cancelled_or_succeeded_attempt_is_not_held(kube, held_cloud, world, api):
    done = submit(api, debug_hold_minutes=20)
    reconcile_pass()
    kube.run(job_name(done))
    kube.finish(job_name(done), 0)
    helpers.drive(done, until={"SUCCEEDED"})
    cancelled = submit(api, debug_hold_minutes=20)
    reconcile_pass()
    kube.run(job_name(cancelled))
    helpers.drive(cancelled, until={"RUNNING"})
    assert api("bob").post(f"/api/v1/tasks/{cancelled.pk}/cancel").status_code == 202
    helpers.drive(cancelled, until={"CANCELLED"})
    helpers.wait_for(lambda: reconcile_pass() is not None and not kube.jobs(), what="both Jobs removed without a hold")
    assert not Attempt.objects.filter(hold_until__isnull=False).exists()


def test_the_held_attempt_counts_against_quota_beside_its_retry(kube, held_cloud, world, api):
    Quota.objects.create(project=world.alpha, connection=held_cloud, max_tasks=2)
    task, first = failed_and_held(kube, api, retry_limit=1, resources={"cpu": 0.5, "memory_mb": 64})
    assert task.state == "RETRY_WAIT"
    task = helpers.drive(task, until={"STARTING"}, timeout=10)  # the retry (backoff 1 s): attempt 2
    second = job_name(task, 2)
    assert {first, second} <= set(kube.jobs())  # the held pod stays beside the new one
    usage = task_quota_usage(project_id=world.alpha.pk, connection_id=held_cloud.pk)
    assert usage.tasks == 2 and usage.memory_mb == 128
    other = submit(api, name="waits")
    reconcile_pass()
    other.refresh_from_db()
    assert other.state == "PENDING" and "2/2 tasks in use" in other.state_reason

    kube.run(second)
    kube.finish(second, 0)
    task = helpers.drive(task, until={"SUCCEEDED"})
    reconcile_pass()  # admission: attempt 2 no longer counts, the held attempt 1 still does
    other.refresh_from_db()
    assert other.state != "PENDING", other.state_reason
    assert task_quota_usage(project_id=world.alpha.pk, connection_id=held_cloud.pk).tasks == 2
    assert first in kube.jobs()
    assert api("bob").post(f"/api/v1/tasks/{task.pk}/release-hold").json()["released"] == [1]
    helpers.wait_for(lambda: reconcile_pass() is not None and first not in kube.jobs(), what="the held Job removed")
    assert task_quota_usage(project_id=world.alpha.pk, connection_id=held_cloud.pk).tasks == 1  # `other` only


@pytest.mark.parametrize(
    ("options", "minutes", "words"),
    [
        ({}, 5, "debug holds are not allowed on k3s-lab"),
        ({"debug_hold_max_minutes": 0}, 5, "debug holds are not allowed on k3s-lab"),
        ({"debug_hold_max_minutes": 30}, 31, "debug holds on k3s-lab are limited to 30 minutes"),
    ],
    ids=["no-option", "zero", "over-the-limit"],
)
def test_a_hold_the_connection_does_not_allow_is_a_400_on_the_field(
    kube, kube_connection, world, api, options, minutes, words
):
    kube_connection.options = kube_connection.options | options
    kube_connection.save()
    document = {"cloud": "k3s-lab", "image": "busybox", "command": ["false"], "debug_hold_minutes": minutes}
    response = api("bob").post("/api/v1/tasks", document, format="json")
    assert response.status_code == 400, response.json()
    error = response.json()["errors"][0]
    assert error["field"] == "debug_hold_minutes" and error["message"].startswith(words), error
    assert not Task.objects.exists()


def test_a_project_that_loses_its_grant_loses_its_holds_there(kube, held_cloud, world, api):
    task, name = failed_and_held(kube, api)
    held_cloud.projects.remove(world.alpha)  # any way the grant goes (here: the shell)
    reconcile_pass()
    assert name not in kube.jobs()
    assert task.events.filter(type="debug_hold_expired").count() == 1


def test_a_timed_out_container_is_stopped_on_time_and_not_held(kube, held_cloud, world, api):
    task = submit(api, debug_hold_minutes=20, timeout_seconds=1)
    reconcile_pass()
    name = job_name(task)
    kube.run(name)
    task = helpers.drive(task, until={"RUNNING"})
    # CloudPivot's own timeout stops it (the Job's deadline was lengthened by the hold): the Job is deleted
    task = helpers.drive(task, until={"TIMED_OUT", "FAILED", "UNKNOWN"}, timeout=30)
    assert task.state == "TIMED_OUT", task.state_reason
    assert Attempt.objects.get(task=task).hold_until is None
    helpers.wait_for(lambda: reconcile_pass() is not None and name not in kube.jobs(), what="the Job removed")
