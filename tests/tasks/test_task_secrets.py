"""Project secrets in tasks: named in the document, delivered to a real local execution (env and a 0600 file),
masked in the stored log, and nowhere else: not in the document, the events, the task API, the page.
"""

from __future__ import annotations

import json

import pytest

from cloudpivot.accounts.models import ProjectSecret
from cloudpivot.accounts.project_secrets import secret_create
from tasks.models import LogChunk, Task
from tasks.services.logs import log_read
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec, v1_runner_client

VALUE = "pa55-Word-for-the-db"
FILE_VALUE = "-----KEY 9f8e7d-----"


def _secret(world, name: str = "db-password", value: str = VALUE) -> ProjectSecret:
    return secret_create(user=world.alice, project=world.alpha, name=name, value=value)


@pytest.mark.django_db(transaction=True)
def test_a_local_task_reads_its_secrets_and_its_log_shows_them_masked(live, world, pages, tmp_path):
    _secret(world)
    _secret(world, name="tls-key", value=FILE_VALUE)
    path = tmp_path / "delivered" / "key.pem"
    program = (
        "import os\n"
        "print('env=' + os.environ['DB_PASSWORD'], flush=True)\n"
        f"print('file=' + open({str(path)!r}).read(), flush=True)\n"
        f"print('mode=' + oct(os.stat({str(path)!r}).st_mode & 0o777), flush=True)\n"
        "import sys; sys.stderr.write('err ' + os.environ['DB_PASSWORD'] + ' end\\n')\n"
    )
    document = hello_spec(
        command=["python3", "-c", program],
        secrets=[{"name": "db-password", "env": "DB_PASSWORD"}, {"name": "tls-key", "file": str(path)}],
    )
    created = helpers.api_call(live.url, "POST", "/api/v1/tasks", world.tokens["bob"], document)
    task = helpers.drive(Task.objects.get(pk=created["id"]), until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "SUCCEEDED", task.state_reason
    log = helpers.api_call(live.url, "GET", f"/api/v1/tasks/{task.pk}/logs", world.tokens["bob"])["data"]
    assert "env=***\n" in log and "file=***\n" in log and "mode=0o600\n" in log and "err *** end\n" in log, log
    assert log_read(task=task, stream="stdout")["data"] == "env=***\nfile=***\nmode=0o600\n"
    # Nowhere else: the stored rows, the API's answers, the task page.
    stored = [bytes(data) for data in LogChunk.objects.filter(task=task).values_list("data", flat=True)]
    answers = [
        json.dumps(helpers.api_call(live.url, "GET", f"/api/v1/tasks/{task.pk}{tail}", world.tokens["bob"]))
        for tail in ("", "/events", "/attempts")
    ]
    page = pages("bob").get(f"/tasks/{task.pk}/")
    assert page.status_code == 200
    events = json.dumps(list(task.events.values("message", "data")), default=str)
    for text in (json.dumps(task.spec), json.dumps(task.normalized), events, *answers, page.content.decode()):
        assert VALUE not in text and FILE_VALUE not in text
    assert all(VALUE.encode() not in data and FILE_VALUE.encode() not in data for data in stored)
    assert task.spec["secrets"][0] == {"name": "db-password", "env": "DB_PASSWORD"}  # the reference is kept


@pytest.mark.django_db(transaction=True)
def test_a_secret_deleted_before_the_start_fails_the_task_in_words(live, world):
    _secret(world)
    task, _ = task_submit(user=world.bob, document=hello_spec(secrets=[{"name": "db-password", "env": "DB_PASSWORD"}]))
    ProjectSecret.objects.all().delete()
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "FAILED"
    assert "the project secret 'db-password' no longer exists" in task.state_reason


def test_an_unknown_secret_name_is_a_400_naming_the_field(api, world):
    _secret(world)
    refs = [{"name": "db-password", "env": "DB_PASSWORD"}, {"name": "missing", "file": "/run/x"}]
    response = api("bob").post("/api/v1/tasks", hello_spec(secrets=refs), format="json")
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == "secrets.1.name"
    assert "no secret named 'missing'" in response.json()["message"]
    # Another project's secret of that name is just as unknown.
    ProjectSecret.objects.create(project=world.beta, name="missing", value_encrypted="x")
    assert api("bob").post("/api/v1/tasks", hello_spec(secrets=refs), format="json").status_code == 400
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    ("refs", "field"),
    [
        ([{"name": "db-password"}], "secrets.0.env"),
        ([{"name": "db-password", "env": "A", "file": "/x"}], "secrets.0.env"),
        ([{"name": "db-password", "env": "1BAD"}], "secrets.0.env"),
        ([{"name": "db-password", "file": "relative/path"}], "secrets.0.file"),
        ([{"name": "db-password", "env": "A"}, {"name": "db-password", "env": "A"}], "secrets"),
        ([{"name": "db-password", "env": "GREETING"}], "secrets"),
        ([{"name": "db-password", "env": "A", "value": "x"}], "secrets.0.value"),
    ],
)
def test_a_malformed_reference_is_a_400_naming_the_field(api, world, refs, field):
    _secret(world)
    response = api("bob").post("/api/v1/tasks", hello_spec(secrets=refs, env={"GREETING": "hi"}), format="json")
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == field


def test_a_value_split_between_two_pieces_of_log_is_masked_in_both(world):
    from django.db import transaction

    from tasks.services.attempts import attempt_create
    from tasks.services.lifecycle import task_lock
    from tasks.services.logs import log_append

    _secret(world)
    task, _ = task_submit(user=world.bob, document=hello_spec(secrets=[{"name": "db-password", "env": "P"}]))
    with transaction.atomic():
        attempt = attempt_create(task=task_lock(task.pk), reason="test")
    first, second = b"before " + VALUE.encode()[:7], VALUE.encode()[7:] + b" after; again " + VALUE.encode() + b"\n"
    assert log_append(attempt=attempt, stream="stdout", offset=0, data=first) == len(first)
    log_append(attempt=attempt, stream="stderr", offset=0, data=b"other stream\n")
    assert log_append(attempt=attempt, stream="stdout", offset=len(first), data=second) == len(first) + len(second)
    text = log_read(task=task, stream="stdout")["data"]
    assert VALUE[:5] not in text and VALUE[-5:] not in text, text
    assert text == "before " + "*" * len(VALUE) + " after; again ***\n"
    assert log_read(task=task)["data"] == "before " + "*" * 7 + "other stream\n" + "*" * (len(VALUE) - 7) + (
        " after; again ***\n"
    )


def test_cloning_a_task_with_secrets_fills_the_secrets_field_with_the_references(pages, world):
    _secret(world)
    _secret(world, name="tls-key", value=FILE_VALUE)
    refs = [{"name": "db-password", "env": "DB_PASSWORD"}, {"name": "tls-key", "file": "/run/tls.pem"}]
    task, _ = task_submit(user=world.bob, document=hello_spec(secrets=refs))
    client = pages("bob")
    response = client.get(f"/tasks/new?clone={task.pk}")
    assert response.context["mode"] == "form"  # the form has a secrets field: the clone keeps them there
    assert response.context["form"].initial["secrets"] == "db-password=DB_PASSWORD\ntls-key=/run/tls.pem"
    assert json.loads(response.context["raw"].initial["document"])["secrets"] == refs
    content = response.content.decode()
    assert VALUE not in content and FILE_VALUE not in content
    assert "secrets: db-password, tls-key." in content  # the project's secrets by name, for the submitter
    # sent as it came, the form submits the same references
    form = response.context["form"]
    data = {f"form-{name}": value for name, value in form.initial.items() if value is not None}
    response = client.post("/tasks/new", data | {"mode": "form", "form-name": "the clone"})
    assert response.status_code == 302
    assert Task.objects.get(name="the clone").normalized["secrets"] == refs


@pytest.mark.django_db(transaction=True)
def test_a_secret_in_a_progress_message_a_result_or_an_exit_reason_is_masked_too(world):
    """What a program reports besides its log (through the Runner API, as a Runner sends it) is masked alike."""
    from django.db import transaction

    from tasks.services.attempts import attempt_create
    from tasks.services.lifecycle import task_lock

    _secret(world)
    task, _ = task_submit(user=world.bob, document=hello_spec(secrets=[{"name": "db-password", "env": "P"}]))
    with transaction.atomic():
        attempt = attempt_create(task=task_lock(task.pk), reason="test")
    runner = v1_runner_client(attempt)

    def ev(seq, type, **data):
        return {"seq": seq, "type": type, "time": "2026-12-07T12:00:00Z", "data": data}

    events = [
        ev(1, "started", pid=7),
        ev(2, "progress", message=f"connected with {VALUE}", fraction=0.5),
        ev(3, "result", summary={"dsn": f"postgres://u:{VALUE}@db", "n": 3}, refs=[f"s3://b/{VALUE}"]),
        ev(4, "exited", exit_code=1, signal=None, reason=f"login as {VALUE} refused"),
    ]
    assert runner.post("/runner/v1/events", {"events": events}, format="json").status_code == 200
    task.refresh_from_db()
    stored = json.dumps([task.result, task.state_reason, list(task.events.values("message", "data"))], default=str)
    assert VALUE not in stored, stored
    assert task.result == {"summary": {"dsn": "postgres://u:***@db", "n": 3}, "refs": ["s3://b/***"]}
    assert task.events.get(type="progress").message == "connected with ***"
    assert task.state == "FAILED" and "login as *** refused" in task.state_reason
