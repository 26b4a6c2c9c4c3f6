"""The Runner API contract, request by request (docs/runner.md)."""

from __future__ import annotations

import base64

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from cloudpivot import credentials
from tasks.models import Attempt, Task
from tasks.services.attempts import attempt_create
from tasks.services.lifecycle import task_lock
from tasks.services.submission import task_submit
from tests.builders import hello_spec, runner_client, v1_runner_client


def attempt_on(world, document: dict) -> Attempt:
    task, _ = task_submit(user=world.bob, document=document)
    with transaction.atomic():
        return attempt_create(task=task_lock(task.pk), reason="test")


@pytest.fixture
def attempt(world):
    return attempt_on(world, hello_spec(retry_limit=1))


runner = v1_runner_client  # these attempts speak protocol v1, as a VM booted before its retirement


def events(client, *batch):
    return client.post("/runner/v1/events", {"events": list(batch)}, format="json")


def ev(seq, type, **data):
    return {"seq": seq, "type": type, "time": "2026-11-30T12:00:00Z", "data": data}


def test_the_assignment_carries_the_literal_argv_and_resume_points(attempt):
    body = runner(attempt).get("/runner/v1/assignment").json()
    assert body["argv"] == ["python3", "-c", "print('hello')"]
    assert body["attempt"] == attempt.external_name
    assert body["acked_seq"] == 0 and body["log_offsets"] == {"stdout": 0, "stderr": 0}
    assert body["stop_requested"] is False


def test_a_user_token_is_refused_on_the_runner_api(api, attempt, world):
    client = api("bob")
    response = client.get("/runner/v1/assignment")
    assert response.status_code == 401
    assert "not accepted on the Runner API" in response.json()["message"]


def test_an_unknown_credential_is_refused(attempt):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer cpr_forged")
    assert client.get("/runner/v1/assignment").status_code == 401


def test_events_apply_in_order_once_and_duplicates_are_acknowledged(attempt):
    client = runner(attempt)
    # seq 2 before seq 1: held back, nothing applied past the gap.
    assert events(client, ev(2, "progress", message="half")).json()["acked_seq"] == 0
    assert events(client, ev(1, "started", pid=42), ev(2, "progress", message="half")).json()["acked_seq"] == 2
    # The same batch again: acknowledged, applied no second time.
    assert events(client, ev(1, "started", pid=42), ev(2, "progress", message="half")).json()["acked_seq"] == 2
    task = Task.objects.get(pk=attempt.task_id)
    assert task.state == "RUNNING"
    assert task.events.filter(type="progress").count() == 1
    assert task.events.filter(type="state", data__to="RUNNING").count() == 1


def test_exited_closes_the_attempt_and_later_new_events_get_409(attempt):
    client = runner(attempt)
    events(
        client, ev(1, "started", pid=1), ev(2, "result", summary={"rows": 3}), ev(3, "exited", exit_code=0, signal=None)
    )
    task = Task.objects.get(pk=attempt.task_id)
    assert task.state == "SUCCEEDED" and task.result == {"summary": {"rows": 3}, "refs": []}
    assert events(client, ev(3, "exited", exit_code=0)).json()["acked_seq"] == 3  # a resend
    response = events(client, ev(4, "progress", message="late"))
    assert response.status_code == 409 and response.json()["code"] == "attempt_closed"
    assert client.post("/runner/v1/heartbeat", {"boot_id": "b"}, format="json").status_code == 409


def test_a_late_event_from_a_superseded_attempt_is_refused(attempt):
    old = runner(attempt)
    events(old, ev(1, "started", pid=1), ev(2, "exited", exit_code=1))
    task = Task.objects.get(pk=attempt.task_id)
    assert task.state == "RETRY_WAIT"
    Task.objects.filter(pk=task.pk).update(next_attempt_at=None)
    with transaction.atomic():
        new_attempt = attempt_create(task=task_lock(task.pk), reason="retry")
    response = events(old, ev(3, "progress", message="zombie"))
    assert response.status_code == 409
    new_attempt.refresh_from_db()
    assert new_attempt.acked_seq == 0 and Task.objects.get(pk=task.pk).state == "SUBMITTING"


def test_lost_makes_the_task_unknown_with_the_evidence(attempt):
    client = runner(attempt)
    events(client, ev(1, "started", pid=1), ev(2, "lost", reason="the host rebooted while the program ran"))
    task = Task.objects.get(pk=attempt.task_id)
    assert task.state == "UNKNOWN"
    assert "the host rebooted" in task.state_reason
    assert task.attempts_count == 1  # never a silent re-run


def test_logs_append_at_the_expected_offset_only(attempt):
    client = runner(attempt)

    def send(offset, data, stream="stdout"):
        return client.post(
            "/runner/v1/logs",
            {"stream": stream, "offset": offset, "data": base64.b64encode(data).decode()},
            format="json",
        )

    assert send(0, b"hello ").json()["next_offset"] == 6
    assert send(0, b"hello ").json()["next_offset"] == 6  # resend: acknowledged, ignored
    assert send(3, b"lo world\n").json()["next_offset"] == 12  # overlap: only the new bytes
    gap = send(20, b"later")
    assert gap.status_code == 409 and gap.json()["expected_offset"] == 12
    assert send(0, b"oops\n", stream="stderr").json()["next_offset"] == 5
    from tasks.services.logs import log_read

    task = Task.objects.get(pk=attempt.task_id)
    assert log_read(task=task)["data"] == "hello world\noops\n"
    assert log_read(task=task, stream="stdout", offset=6)["data"] == "world\n"
    assert log_read(task=task, offset=13)["data"] == "ops\n"
    assert (
        client.post("/runner/v1/logs", {"stream": "stdout", "offset": 12, "data": "!!"}, format="json").status_code
        == 400
    )


def test_the_heartbeat_answers_the_stop_flag(attempt, world):
    from tasks.services import task_cancel

    client = runner(attempt)
    events(client, ev(1, "started", pid=1))
    assert client.post("/runner/v1/heartbeat", {"boot_id": "b1", "pid": 7}, format="json").json() == {
        "stop_requested": False,
        "acked_seq": 1,
    }
    task_cancel(task_id=attempt.task_id, user=world.bob)
    assert client.post("/runner/v1/heartbeat", {"boot_id": "b1"}, format="json").json()["stop_requested"] is True
    # Every answer carries the flag, so a Runner busy sending logs learns it without a heartbeat.
    log_answer = client.post("/runner/v1/logs", {"stream": "stdout", "offset": 0, "data": ""}, format="json").json()
    assert log_answer == {"next_offset": 0, "stop_requested": True}
    assert events(client).json() == {"acked_seq": 1, "stop_requested": True}
    events(client, ev(2, "exited", exit_code=None, signal=15))
    assert Task.objects.get(pk=attempt.task_id).state == "CANCELLED"


def test_bytes_past_the_log_cap_are_counted_not_kept_and_said_once(attempt, settings):
    settings.LOG_MAX_BYTES_PER_TASK = 10
    client = runner(attempt)

    def send(offset, data):
        body = {"stream": "stdout", "offset": offset, "data": base64.b64encode(data).decode()}
        return client.post("/runner/v1/logs", body, format="json").json()["next_offset"]

    assert send(0, b"123456") == 6
    assert send(6, b"7890abcdef") == 16  # the Runner's offsets go on ...
    assert send(16, b"more") == 20
    from tasks.services.logs import log_read

    task = Task.objects.get(pk=attempt.task_id)
    assert log_read(task=task)["data"] == "1234567890"  # ... but only the cap is kept
    assert task.events.filter(type="log_truncated").count() == 1
    attempt.refresh_from_db()
    assert (attempt.log_bytes, attempt.log_dropped_bytes) == (10, 10)


def test_an_interrupted_report_requeues_without_using_a_retry_unless_the_task_asks_to_fail(world):
    requeued = attempt_on(world, hello_spec())
    events(runner(requeued), ev(1, "started", pid=1), ev(2, "lost", reason="the host rebooted", interrupted=True))
    task = Task.objects.get(pk=requeued.task_id)
    assert (task.state, task.failed_attempts, task.interruptions) == ("RETRY_WAIT", 0, 1)
    assert "interrupted: the host rebooted" in task.state_reason and "retries are not used up" in task.state_reason

    failing = attempt_on(world, hello_spec(on_interrupt="fail"))
    events(runner(failing), ev(1, "started", pid=1), ev(2, "lost", reason="the host rebooted", interrupted=True))
    task = Task.objects.get(pk=failing.task_id)
    assert task.state == "FAILED" and "on_interrupt: fail" in task.state_reason
    assert task.attempts.get().state == "interrupted"


def test_protocol_v1_is_refused_in_words_for_an_attempt_started_since_its_retirement(attempt):
    """Only a VM booted before the upgrade may go on speaking v1; nothing a refused call carries is applied."""
    client = runner_client(attempt)  # the attempt is of this release: its VM runs the host program (v2)
    calls = [
        ("get", "/runner/v1/assignment", None),
        ("post", "/runner/v1/heartbeat", {"boot_id": "b", "pid": 1}),
        ("post", "/runner/v1/events", {"events": [ev(1, "started", pid=4)]}),
        ("post", "/runner/v1/logs", {"stream": "stdout", "offset": 0, "data": base64.b64encode(b"hi").decode()}),
    ]
    for method, path, body in calls:
        response = getattr(client, method)(path, body, format="json")
        assert response.status_code == 401, (path, response.content)
        assert response.json()["code"] == "protocol_retired"
        assert "Protocol v1 is retired" in response.json()["message"]
        assert "/runner/v2/sync" in response.json()["message"]
    attempt.refresh_from_db()
    assert (attempt.acked_seq, attempt.log_stdout_bytes, attempt.runner_contact_at) == (0, 0, None)
    answer = client.post("/runner/v2/sync", {"protocol": 2, "agent": {"name": "vm"}, "known": []}, format="json")
    assert answer.status_code == 200
    assert [a["attempt"] for a in answer.json()["assignments"]] == [attempt.external_name]


def test_a_vm_bootstraps_on_v2_and_only_a_vm_of_before_the_retirement_on_v1(world):
    from runner_api.bootstrap import bootstrap_secret_issue

    new, old = attempt_on(world, hello_spec()), attempt_on(world, hello_spec())
    v1_runner_client(old)  # dated before the retirement
    secrets = {
        attempt.pk: bootstrap_secret_issue(
            attempt_id=attempt.pk,
            runner_credential=credentials.runner_credential(
                external_name=attempt.external_name, nonce=attempt.credential_nonce
            ),
        )
        for attempt in (new, old)
    }

    def exchange(path, attempt):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secrets[attempt.pk]}")
        return client.post(path, {}, format="json")

    refused = exchange("/runner/v1/bootstrap", new)
    assert refused.status_code == 401 and refused.json()["code"] == "protocol_retired"
    assert exchange("/runner/v2/bootstrap", new).json()["attempt"] == new.external_name
    assert exchange("/runner/v1/bootstrap", old).json()["attempt"] == old.external_name
