"""Project secrets of a container task: a Kubernetes Secret per attempt, referenced by the Job, owned by it,
deleted with it; the Job manifest holds no value, and a value the pod prints is masked in the copied log.
"""

from __future__ import annotations

import base64
import json

import kmock
import pytest
from django_q.conf import Conf

from cloudpivot.accounts.project_secrets import secret_create
from tasks.models import Attempt
from tasks.services import reconcile_pass
from tasks.services.logs import log_read
from tasks.services.submission import task_submit
from tests import helpers
from tests.helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
SECRETS = kmock.resource("", "v1", "secrets")
VALUE = "k8s-Pa55word-42"
FILE_VALUE = "line one\nline two of the key"


@pytest.fixture
def inline_jobs(monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", True)


def test_a_container_task_gets_its_secrets_from_a_secret_owned_by_its_job(kube, kube_connection, world, inline_jobs):
    secret_create(user=world.alice, project=world.alpha, name="db-password", value=VALUE)
    secret_create(user=world.alice, project=world.alpha, name="tls-key", value=FILE_VALUE)
    document = {
        "cloud": "k3s-lab",
        "image": "python:3.12-slim",
        "command": ["sh", "-c", "echo $DB_PASSWORD"],
        "secrets": [{"name": "db-password", "env": "DB_PASSWORD"}, {"name": "tls-key", "file": "/etc/app/key.pem"}],
    }
    task, _ = task_submit(user=world.bob, document=document)
    reconcile_pass()
    task.refresh_from_db()
    assert task.state == "STARTING", task.state_reason
    name = f"cp-{task.id.hex}-1"
    job = kube.jobs()[name]
    secret = kube.objects(SECRETS)[name]
    # The Secret holds the values under the secrets' names, and belongs to the Job.
    decoded = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    assert decoded == {"db-password": VALUE, "tls-key": FILE_VALUE}
    owners = secret["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [("Job", name, job["metadata"]["uid"])]
    # The Job refers to it: the variable by secretKeyRef, the file by a secret volume mounted at its path.
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": name, "key": "db-password"}}} in container[
        "env"
    ]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/etc/app/key.pem")
    assert mount["subPath"] == "tls-key" and mount["readOnly"] is True
    volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == name
    assert VALUE not in json.dumps(job) and "line two" not in json.dumps(job)

    # What the pod prints of a value is masked in the copied log.
    kube.schedule(name)
    kube.run(name)
    kube.log(name, f"password is {VALUE}\n")
    kube.finish(name, 0)
    task = helpers.drive(task, until={"SUCCEEDED", "FAILED", "UNKNOWN"})
    assert task.state == "SUCCEEDED", task.state_reason
    assert log_read(task=task)["data"] == "password is ***\n"
    # Cleanup deletes the Job and the Secret with it.
    attempt = task.attempts.get()
    wait_for(
        lambda: reconcile_pass() is not None and Attempt.objects.get(pk=attempt.pk).cleanup_state == "done",
        what="cleanup",
    )
    assert name not in kube.jobs() and name not in kube.objects(SECRETS)
    assert VALUE not in json.dumps(list(task.events.values("message", "data")), default=str)


def test_a_task_without_secrets_makes_no_secret(kube, kube_connection, world, inline_jobs):
    task, _ = task_submit(user=world.bob, document={"cloud": "k3s-lab", "image": "busybox", "command": ["true"]})
    reconcile_pass()
    task.refresh_from_db()
    assert task.state == "STARTING" and kube.objects(SECRETS) == {}
