"""The submit's statements (issue 11, branch submit-lean): one commit with its audit entry, the queue place read
by the task's own INSERT (no COUNT), the task document checked by kept serializers, staff's target in one query."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from cloudpivot.accounts.models import AuditEntry
from cloudpivot.accounts.services import api_token_create
from cloudpivot.api import flatten_errors
from cloudpivot.exceptions import InvalidSpec
from clusters.models import CloudConnection
from tasks.models import Task
from tasks.selectors import task_queue_position
from tasks.specs import TaskSpecSerializer, spec_normalize
from tests.builders import hello_spec
from tests.stack_client import routed

URL = "/api/v1/tasks"


def post(client, body, **headers):
    return client.post(URL, data=json.dumps(body), content_type="application/json", **headers)


@pytest.mark.django_db(transaction=True)
def test_a_submit_commits_once_with_its_audit_entry_inside(api, world):
    client = api("bob")
    assert post(client, hello_spec()).status_code == 201  # the token's last_used_at is written once a minute
    with CaptureQueriesContext(connection) as queries:
        response = post(client, hello_spec(name="audited"))
    assert response.status_code == 201, response.json()
    sql = [q["sql"] for q in queries.captured_queries]
    commits = [i for i, text in enumerate(sql) if text.startswith("COMMIT")]
    inserts = [i for i, text in enumerate(sql) if text.startswith("INSERT")]
    assert len(commits) == 1 and len(inserts) == 4, sql  # task, event, feed copy, audit: one transaction
    assert "accounts_auditentry" in sql[inserts[-1]] and inserts[-1] < commits[0], sql
    entry = AuditEntry.objects.get(object_ref=response.json()["id"])
    assert (entry.actor, entry.actor_name, entry.via, entry.action, entry.method, entry.path) == (
        world.bob,
        "bob",
        "api",
        "tasks-api:task-list",
        "POST",
        URL,
    )
    assert (entry.status_code, entry.outcome, entry.remote_addr, entry.details) == (201, "ok", "127.0.0.1", {})
    assert AuditEntry.objects.count() == 2  # one per submit, none written twice


@pytest.mark.django_db(transaction=True)
def test_a_replay_and_a_refusal_are_audited_after_the_answer_as_before(api, world):
    client = api("bob")
    first = post(client, hello_spec(), HTTP_IDEMPOTENCY_KEY="k1")
    again = post(client, hello_spec(), HTTP_IDEMPOTENCY_KEY="k1")
    assert (first.status_code, again.status_code) == (201, 200)
    refused = post(client, {"cloud": "local"})
    assert refused.status_code == 400
    entries = list(AuditEntry.objects.order_by("id").values_list("object_ref", "status_code", "outcome"))
    task_id = first.json()["id"]
    assert entries == [(task_id, 201, "ok"), (task_id, 200, "ok"), ("", 400, "refused")]


def test_a_submit_learns_its_queue_place_from_its_insert(api, world):
    client = api("bob")
    places = []
    for _ in range(3):
        with CaptureQueriesContext(connection) as queries:
            response = post(client, hello_spec())
        assert response.status_code == 201, response.json()
        assert not [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"] and "INSERT" not in q["sql"]]
        places.append(response.json()["queue_position"])
    assert places == [1, 2, 3]
    # Only the waiting tasks of the same connection, created before it, are ahead.
    Task.objects.filter(pk=Task.objects.order_by("created_at").first().pk).update(state="SUCCEEDED")
    Task.objects.filter(pk=Task.objects.order_by("created_at").last().pk).update(
        created_at=timezone.now() + timedelta(hours=1)
    )
    other = CloudConnection.objects.create(cloud_id="other", backend="local", options={"runs_dir": "/nonexistent"})
    other.projects.add(world.alpha)
    assert post(client, hello_spec(cloud="other")).json()["queue_position"] == 1
    response = post(client, hello_spec())
    assert response.json()["queue_position"] == 2  # the second task; the third was created after it
    assert response.json() == api("bob").get(f"{URL}/{response.json()['id']}").json()


def test_the_place_from_the_insert_breaks_ties_by_id_as_the_count_does(api, world, monkeypatch):
    client = api("bob")
    frozen = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: frozen)  # every task created at the same instant
    for _ in range(8):
        answer = post(client, hello_spec()).json()
        assert answer["queue_position"] == task_queue_position(task=Task.objects.get(pk=answer["id"])), answer


def test_a_superuser_submit_finds_its_connection_and_project_in_one_query(world):
    root = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client = routed(APIClient())
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=root, name='t')[1]}")

    def lookups(body) -> tuple[int, dict]:
        """The SELECTs of a submit but the token's and the quotas': where it goes (connection, project)."""
        with CaptureQueriesContext(connection) as queries:
            response = post(client, body)
        sql = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT")]
        return len([text for text in sql if "accounts_apitoken" not in text and "accounts_quota" not in text]), response

    assert post(client, hello_spec(project="beta")).status_code == 201  # not a member: staff act as admins
    count, response = lookups(hello_spec(project="alpha"))
    assert response.status_code == 201 and count == 1, response.json()
    count, response = lookups(hello_spec())  # granted to alpha and beta: name one, as before
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "project"
    world.local.projects.remove(world.beta)
    count, response = lookups(hello_spec())
    assert response.status_code == 201 and count == 1, response.json()
    assert Task.objects.get(pk=response.json()["id"]).project == world.alpha
    response = post(client, hello_spec(cloud="nowhere"))
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "cloud"


DOCUMENTS = [
    hello_spec(),
    {"cloud": "local", "command": ["echo", 1]},
    hello_spec(env={"A": "1", "1B": "x"}, labels={"k": "v"}),
    {"cloud": "local", "comand": ["x"]},
    hello_spec(volumes=[{"claim": "data", "mount_path": "/d"}, {"claim": "Bad!", "mount_path": "rel"}]),
    hello_spec(resources={"cpu": 2, "memory_mb": 512}, retry_limit=3, timeout_seconds=60),
    hello_spec(secrets=[{"name": "db", "env": "DB"}, {"name": "x"}], tolerations=[{"operator": "Exists"}]),
    "not an object",
    hello_spec(tolerations=[{"operator": "Equal"}], node_selector={"disk": "ssd"}),
]


def fresh(document):
    """What a serializer built for this document alone says."""
    serializer = TaskSpecSerializer(data=document)
    if not serializer.is_valid():
        return flatten_errors(serializer.errors)
    normalized = dict(serializer.validated_data)
    normalized["resources"] = dict(normalized.get("resources") or {"gpu": 0})
    return normalized


def kept(document):
    try:
        return spec_normalize(document)
    except InvalidSpec as error:
        return error.errors


def test_a_kept_spec_serializer_answers_every_document_as_a_new_one_would():
    expected = [fresh(document) for document in DOCUMENTS]
    for _ in range(3):  # each document after every other one
        assert [kept(document) for document in DOCUMENTS] == expected
    assert any(isinstance(answer, list) and answer[0]["field"] == "command.1" for answer in expected)
    assert any(isinstance(answer, list) and answer[0]["field"] == "volumes.1.claim" for answer in expected)


def test_threads_never_share_a_kept_spec_serializer():
    expected = [fresh(document) for document in DOCUMENTS]
    wrong: list = []
    start = threading.Barrier(8)

    def check(shift: int) -> None:
        start.wait()
        for round_ in range(200):
            index = (shift + round_) % len(DOCUMENTS)
            if (answer := kept(DOCUMENTS[index])) != expected[index]:
                wrong.append((index, answer))

    threads = [threading.Thread(target=check, args=(shift,)) for shift in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
