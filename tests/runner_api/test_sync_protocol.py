"""Protocol v2 (POST /runner/v2/sync), request by request (docs/runner.md, "Protocol v2")."""

from __future__ import annotations

import base64
import time

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from cloudpivot import credentials
from tasks.models import LogChunk, Task
from tasks.services import task_cancel
from tasks.services.attempts import attempt_create
from tasks.services.lifecycle import task_lock
from tasks.services.submission import task_submit
from tests.builders import hello_spec
from tests.runner_api.support import admitted, chunk, ev, sync


def test_a_new_attempt_is_handed_out_once_and_moves_to_starting(agent, world):
    attempt = admitted(world, command=["echo", "hi"])
    answer = sync(agent).json()
    [assignment] = answer["assignments"]
    assert assignment["attempt"] == attempt.external_name and assignment["argv"] == ["echo", "hi"]
    assert assignment["acked_seq"] == 0 and assignment["log_offsets"] == {"stdout": 0, "stderr": 0}
    assert "credential" not in str(assignment).lower()
    task = Task.objects.get(pk=attempt.task_id)
    assert task.state == "STARTING" and "host agent" in task.state_reason
    again = sync(agent, known=[attempt.external_name]).json()
    assert again["assignments"] == []
    assert again["attempts"][attempt.external_name] == {
        "acked_seq": 0,
        "log_offsets": {"stdout": 0, "stderr": 0},
        "stop_requested": False,
        "closed": False,
    }


def test_one_batch_applies_every_attempts_events_and_logs_exactly_once(agent, world):
    first, second = admitted(world), admitted(world)
    sync(agent)
    batch = [
        {"attempt": first.external_name, "events": [ev(1, "started", pid=1)], "logs": [chunk("stdout", 0, b"one\n")]},
        {
            "attempt": second.external_name,
            "events": [ev(1, "started", pid=2), ev(2, "exited", exit_code=0, signal=None)],
            "logs": [chunk("stdout", 0, b"two\n"), chunk("stderr", 0, b"\xff")],
        },
    ]
    names = [first.external_name, second.external_name]
    answer = sync(agent, known=names, attempts=batch).json()["attempts"]
    assert answer[first.external_name]["acked_seq"] == 1
    assert answer[first.external_name]["log_offsets"] == {"stdout": 4, "stderr": 0}
    assert answer[second.external_name]["closed"] is True  # exited: the attempt is done
    assert Task.objects.get(pk=second.task_id).state == "SUCCEEDED"
    assert Task.objects.get(pk=first.task_id).state == "RUNNING"
    # The same batch again (an answer lost on the way back): acknowledged, applied no second time.
    again = sync(agent, known=names, attempts=batch[:1]).json()["attempts"]
    assert again[first.external_name]["acked_seq"] == 1
    assert LogChunk.objects.filter(task_id=first.task_id).count() == 1
    assert Task.objects.get(pk=first.task_id).events.filter(type="state", data__to="RUNNING").count() == 1
    # A gap in seqs waits; bytes past the end are skipped and the answer says where to resend from.
    gap = [
        {"attempt": first.external_name, "events": [ev(3, "progress", message="x")], "logs": [chunk("stdout", 9, b"!")]}
    ]
    answer = sync(agent, known=names, attempts=gap).json()["attempts"][first.external_name]
    assert answer["acked_seq"] == 1 and answer["log_offsets"]["stdout"] == 4


def test_late_events_of_a_superseded_attempt_are_refused_without_failing_the_others(agent, world):
    old = admitted(world, retry_limit=1)
    other = admitted(world)
    sync(agent)
    sync(
        agent,
        known=[old.external_name],
        attempts=[{"attempt": old.external_name, "events": [ev(1, "started"), ev(2, "exited", exit_code=1)]}],
    )
    task = Task.objects.get(pk=old.task_id)
    assert task.state == "RETRY_WAIT"
    Task.objects.filter(pk=task.pk).update(next_attempt_at=None)
    with transaction.atomic():
        new = attempt_create(task=task_lock(task.pk), reason="retry")
    batch = [
        {"attempt": old.external_name, "events": [ev(3, "progress", message="zombie")]},
        {"attempt": other.external_name, "events": [ev(1, "started", pid=3)]},
    ]
    answer = sync(agent, known=[old.external_name, other.external_name], attempts=batch)
    assert answer.status_code == 200
    parts = answer.json()["attempts"]
    assert parts[old.external_name]["closed"] is True and "closed" in parts[old.external_name]["error"]
    assert parts[other.external_name]["acked_seq"] == 1
    assert Task.objects.get(pk=task.pk).events.filter(type="progress").count() == 0
    assert [a["attempt"] for a in answer.json()["assignments"]] == [new.external_name]


def test_the_call_is_a_heartbeat_for_every_attempt_the_agent_holds(agent, world):
    attempt = admitted(world)
    sync(agent)
    sync(agent, known=[attempt.external_name])
    attempt.refresh_from_db()
    assert attempt.last_heartbeat_at is not None and attempt.runner_pid == 4242 and attempt.runner_boot_id == "b1"


def test_the_long_poll_waits_for_news_and_answers_a_stop_at_once(agent, world):
    attempt = admitted(world)
    sync(agent)
    started = time.monotonic()
    quiet = sync(agent, known=[attempt.external_name], wait=0.5).json()
    assert time.monotonic() - started >= 0.45 and quiet["assignments"] == []
    task_cancel(task_id=attempt.task_id, user=world.bob)
    started = time.monotonic()
    answer = sync(agent, known=[attempt.external_name], wait=30).json()
    assert time.monotonic() - started < 2 and answer["attempts"][attempt.external_name]["stop_requested"] is True
    # Once the agent says it is stopping that attempt, the stop is no news: the long-poll waits again.
    started = time.monotonic()
    sync(agent, known=[attempt.external_name], stopping=[attempt.external_name], wait=0.5)
    assert time.monotonic() - started >= 0.45


def test_a_vm_runner_may_speak_v2_for_its_one_attempt(world):
    attempt = admitted(world)
    runner = APIClient()
    token = credentials.runner_credential(external_name=attempt.external_name, nonce=attempt.credential_nonce)
    runner.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    answer = sync(runner).json()
    assert [a["attempt"] for a in answer["assignments"]] == [attempt.external_name]
    assert Task.objects.get(pk=attempt.task_id).state == "SUBMITTING"  # its cloud's start path moves it, not v2
    other = admitted(world)
    parts = sync(runner, known=[attempt.external_name, other.external_name]).json()["attempts"]
    assert parts[other.external_name]["closed"] is True and "not an attempt" in parts[other.external_name]["error"]


def test_credentials_are_refused_where_they_do_not_belong(agent, api, world):
    admitted(world)
    user = api("bob")
    response = sync(user, name=agent.agent_name)
    assert response.status_code == 401 and "User API tokens are not accepted" in response.json()["message"]
    assert sync(agent, name="local-somebody-else").status_code == 401
    forged = APIClient()
    forged.credentials(HTTP_AUTHORIZATION="Bearer cpa_forged")
    assert sync(forged, name=agent.agent_name).status_code == 401
    assert agent.get("/runner/v1/assignment").status_code == 401  # the agent credential is v2 only
    assert agent.get("/api/v1/tasks").status_code == 401  # and not a user token


def test_bad_input_gets_400_with_the_field_at_fault(agent):
    response = sync(agent, attempts=[{"attempt": "cp-x-1", "logs": [{"stream": "stdout", "offset": 0, "data": "!!"}]}])
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "attempts.0.logs.0.data"
    wrong = agent.post("/runner/v2/sync", {"protocol": 1}, format="json")
    assert wrong.status_code == 400 and wrong.json()["errors"][0]["field"] == "protocol"
    assert agent.post("/runner/v2/sync", "not json", content_type="application/json").status_code == 400
    assert agent.get("/runner/v2/sync").status_code == 405


def test_json_nested_beyond_what_python_parses_is_a_400_not_a_500(agent):
    body = b'{"attempts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = agent.generic("POST", "/runner/v2/sync", body, content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "parse_error"


def test_a_busy_agents_sync_larger_than_djangos_form_limit_is_applied(agent, world, settings):
    """The Runner API has its own size limit (413 above it); Django's 2.5 MiB form-data cap must not cut in first."""
    attempt = admitted(world, command=["echo", "hi"])
    assert sync(agent).status_code == 200  # handed out
    piece = b"x" * (1024 * 1024)  # the largest chunk; three of them
    logs = [chunk("stdout", n * len(piece), piece) for n in range(3)]
    data = piece * 3
    assert len(base64.b64encode(data)) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    report = {"attempt": attempt.external_name, "events": [], "logs": logs}
    response = sync(agent, known=[attempt.external_name], attempts=[report])
    assert response.status_code == 200, response.content[:300]
    attempt.refresh_from_db()
    assert attempt.log_stdout_bytes == len(data)


def test_a_burst_of_submits_is_handed_out_in_one_long_poll_answer_per_window(agent, world, monkeypatch):
    from runner_api import sync_view

    monkeypatch.setattr(sync_view, "_last_news", {})
    monkeypatch.setattr(sync_view, "COALESCE_SECONDS", 1.0)  # wide, so a slow machine still submits within it
    sync(agent)  # warm: the first request of a test process imports the views
    first = task_submit(user=world.bob, document=hello_spec())[0]
    started = time.monotonic()
    [assignment] = sync(agent, wait=5).json()["assignments"]  # an idle agent is answered at once
    answered = time.monotonic()
    assert assignment["task_id"] == str(first.pk) and answered - started < 0.9
    # Back within the window: the long-poll waits out the rest of it, then hands out all that came meanwhile.
    more = {str(task_submit(user=world.bob, document=hello_spec())[0].pk) for _ in range(3)}
    answer = sync(agent, known=[assignment["attempt"]], wait=5).json()
    assert time.monotonic() - answered >= 0.95
    assert {a["task_id"] for a in answer["assignments"]} == more


def test_a_ring_between_two_long_polls_needs_no_poke(agent, world, monkeypatch):
    """The embedded default's in-process layer: an agent whose long-poll just answered is on its way back, and
    its next long-poll looks at the database first, so a submit meanwhile neither rings nor signals it."""
    from channels.layers import InMemoryChannelLayer, get_channel_layer

    from cloudpivot import realtime

    if not isinstance(get_channel_layer(), InMemoryChannelLayer):
        pytest.skip("with a shared channel layer every ring is sent to every process")
    monkeypatch.setattr(realtime, "_long_poll_answered_at", -100.0)
    assert realtime.ring_agents() is False  # nobody listens, nobody came lately: the caller pokes the agent
    sync(agent, wait=0.1)
    assert realtime.ring_agents() is True
    monkeypatch.setattr(realtime, "_long_poll_answered_at", time.monotonic() - realtime.AGENT_RETURNS_SECONDS)
    assert realtime.ring_agents() is False


def test_an_agents_pid_is_bounded_and_two_vm_runners_with_one_pid_each_have_their_heartbeat(agent, world):
    """Per-process state is keyed by the credential's identity (the attempt), never by a pid the caller chose."""
    body = {"protocol": 2, "agent": {"name": agent.agent_name, "pid": 2**40}, "known": [], "attempts": [], "wait": 0}
    refused = agent.post("/runner/v2/sync", body, format="json")
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "agent.pid"

    runners = []
    for _ in range(2):
        attempt = admitted(world)
        client = APIClient()
        token = credentials.runner_credential(external_name=attempt.external_name, nonce=attempt.credential_nonce)
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        runners.append((attempt, client))
    for attempt, client in runners:  # both report pid 4242, one right after the other
        assert sync(client, known=[attempt.external_name]).status_code == 200
    for attempt, _ in runners:
        attempt.refresh_from_db()
        assert attempt.last_heartbeat_at is not None and attempt.runner_pid == 4242, attempt.external_name


def test_events_per_attempt_are_bounded_and_the_last_kept_one_says_so(agent, world, settings):
    """A program reporting progress without end: acknowledged, but the task's history stops growing."""
    settings.RUNNER_EVENTS_KEPT_PER_ATTEMPT = 5
    attempt = admitted(world)
    sync(agent)
    events = [ev(1, "started", pid=9)] + [ev(seq, "progress", message=f"step {seq}") for seq in range(2, 40)]
    answer = sync(agent, known=[attempt.external_name], attempts=[{"attempt": attempt.external_name, "events": events}])
    assert answer.json()["attempts"][attempt.external_name]["acked_seq"] == 39
    more = [ev(40, "progress", message="step 40"), ev(41, "exited", exit_code=0, signal=None, reason="done")]
    sync(agent, known=[attempt.external_name], attempts=[{"attempt": attempt.external_name, "events": more}])
    task = Task.objects.get(pk=attempt.task_id)
    progress = list(task.events.filter(type="progress").values_list("message", flat=True))
    assert progress[:3] == ["step 2", "step 3", "step 4"]
    assert progress[3:] == ["the program's later progress reports are not kept (5 events per attempt); its log goes on"]
    assert task.state == "SUCCEEDED"  # what changes state is always applied
