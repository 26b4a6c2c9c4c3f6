"""No user can stall the token API or the host agents (issue 34, item 1), measured from outside.

A whole installation on the embedded default (tests/e2e/installation.py: one web process with its four database
threads, a qcluster, the host agent; no Redis) runs a `local` task. Users follow the event feed with many
long-polls at once, more than the process has threads: one token fires 12 (4 are held, the rest get 429 with
Retry-After), three more users hold 4 each. Meanwhile a token API call and an agent sync each answer within a
second, and the running task keeps its state through more than a heartbeat deadline (the agent's syncs were not
held up). Then one token calls faster than its rate: 429 with Retry-After and words saying what to do.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from tests import helpers
from tests.e2e.installation import Installation, PostgresDatabases, using_postgresql
from tests.plugins.dependencies import http

pytestmark = [pytest.mark.e2e]

HEARTBEAT_DEADLINE = 6  # seconds of an agent's silence that make its tasks UNKNOWN
RATE = 300  # per minute and token
USERS = ("bob", "carol", "dave", "erin")
SET_UP = """
import json
from django.contrib.auth import get_user_model
from cloudpivot.accounts.models import Membership, Project, Role
from cloudpivot.accounts.services import api_token_create
from cloudpivot.credentials import agent_credential
project = Project.objects.get(slug="demo")
tokens = {}
for name in %r:
    user = get_user_model().objects.create_user(name, f"{name}@example.org")
    Membership.objects.create(project=project, user=user, role=Role.READER)
    tokens[name] = api_token_create(user=user, name="feed")[1]
print(json.dumps({"tokens": tokens, "agent": agent_credential(name="probe-agent")}))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("capacity")
    databases = PostgresDatabases() if using_postgresql() else None
    var_dir = root / "var"
    url = databases.fresh("capacity") if databases else f"sqlite:///{var_dir / 'cloudpivot.sqlite3'}"
    installation = Installation(root, var_dir=var_dir, database_url=url)  # no Redis: the embedded default
    installation.env |= {
        "CLOUDPIVOT_RUNNER_HEARTBEAT_DEADLINE_SECONDS": str(HEARTBEAT_DEADLINE),
        "CLOUDPIVOT_API_TOKEN_RATE": f"{RATE}/min",
    }
    try:
        installation.set_up()
        made = json.loads(installation.manage("shell", "-c", SET_UP % (USERS,)).strip().splitlines()[-1])
        installation.tokens, installation.agent_credential = made["tokens"], made["agent"]
        installation.start_web(1)
        installation.start_workers(1)
        installation.start_agent()
        yield installation
    finally:
        try:
            installation.stop()
        finally:
            from tests.plugins.servers import kill_leftover_runners

            kill_leftover_runners(root)
            if databases:
                databases.drop_all()


def state_events(site: Installation, task_id: str) -> list[dict]:
    events = site.api("GET", f"/tasks/{task_id}/events?limit=1000")["events"]
    return [event for event in events if event["type"] == "state"]


def timed(call):
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def test_long_polls_hold_no_thread_and_stall_neither_the_api_nor_the_agents(site, tmp_path):
    task_id = site.submit(["sleep", "120"])
    helpers.wait_for(lambda: site.task(task_id)["state"] == "RUNNING", timeout=60, what="the local task to run")
    states_before = state_events(site, task_id)
    nobody = uuid.uuid4()  # a filter no entry matches: each long-poll is held to its end
    answers: dict[str, list[tuple[int, dict, float, dict]]] = {name: [] for name in ("site", *USERS)}
    lock = threading.Lock()

    def poll(name: str, token: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        (status, response_headers, body), seconds = timed(
            lambda: http(f"{site.url}/api/v1/events?task={nobody}&wait=15", headers)
        )
        with lock:
            answers[name].append(
                (status, response_headers, seconds, json.loads(body) if body.startswith(b"{") else {"raw": body})
            )

    threads = [threading.Thread(target=poll, args=("site", site.token)) for _ in range(12)]
    threads += [threading.Thread(target=poll, args=(name, site.tokens[name])) for name in USERS[:3] for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)  # every long-poll is in: 16 held, on a process with 4 database threads

    (status, _, body), seconds = timed(
        lambda: http(f"{site.url}/api/v1/tasks", {"Authorization": f"Bearer {site.token}"})
    )
    assert status == 200 and seconds < 1, (status, seconds)
    agent = {"Authorization": f"Bearer {site.agent_credential}"}
    sync = {"protocol": 2, "agent": {"name": "probe-agent"}, "wait": 0}
    (status, _, body), seconds = timed(lambda: http(f"{site.url}/runner/v2/sync", agent, sync))
    assert status == 200 and seconds < 1, (status, seconds, body)

    refused = [answer for answer in answers["site"] if answer[0] == 429]
    assert len(refused) == 8, answers["site"]
    status, headers, seconds, body = refused[0]
    assert body["code"] == "too_many_long_polls" and "at most 4" in body["message"], body
    assert "single long-poll" in body["message"] and "next_after" in body["message"]
    assert 1 <= int(headers["Retry-After"]) <= 15 and seconds < 5

    time.sleep(HEARTBEAT_DEADLINE + 2)  # past a heartbeat deadline with the long-polls still held
    assert sum(map(len, answers.values())) == 8  # the refused ones; every held long-poll is still held
    task = site.task(task_id)
    assert task["state"] == "RUNNING", task
    assert state_events(site, task_id) == states_before

    for thread in threads:
        thread.join(timeout=30)
    held = [answer for name in answers for answer in answers[name] if answer[0] != 429]
    assert len(held) == 16 and {answer[0] for answer in held} == {200}, held
    assert all(answer[3]["events"] == [] and 14 < answer[2] < 20 for answer in held), held
    site.api("POST", f"/tasks/{task_id}/cancel")


def test_a_token_over_its_rate_gets_429_with_retry_after(site):
    headers = {"Authorization": f"Bearer {site.tokens['erin']}"}
    statuses = []
    for _ in range(2 * RATE):  # the window may turn once during the burst
        status, response_headers, body = http(f"{site.url}/api/v1/tasks?limit=1", headers)
        statuses.append(status)
        if status == 429:
            break
    assert statuses[-1] == 429 and set(statuses[:-1]) == {200}, statuses[-3:]
    assert RATE <= len(statuses) - 1 <= 2 * RATE
    assert 1 <= int(response_headers["Retry-After"]) <= 60
    answer = json.loads(body)
    assert answer["code"] == "throttled" and f"at most {RATE}/min" in answer["message"], answer
    assert "Retry-After" in answer["message"]
    # another token of another user is not held back by erin's
    assert http(f"{site.url}/api/v1/tasks?limit=1", {"Authorization": f"Bearer {site.tokens['dave']}"})[0] == 200
