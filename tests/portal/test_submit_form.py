"""The submit form that fits the cloud: the fields each backend runs, the refresh that keeps what was typed,
clone and edit into the fields, and the CSRF token where it belongs (tests.helpers.csrf_problems)."""

from __future__ import annotations

import json

import pytest

from cloudpivot.accounts.project_secrets import secret_create
from tasks.forms import TaskSubmitForm, initial_from_task
from tasks.models import Task
from tasks.services.submission import task_submit
from tasks.submit_choices import inventory_images
from tests import helpers
from tests.clusters.kube_api import PVCS

pytestmark = pytest.mark.django_db
CLOUD_FIELDS = ("image", "cpu", "memory_mb", "gpu", "volumes", "secrets", "labels", "workdir", "env")


def shown_fields(content: str) -> set[str]:
    return {name for name in CLOUD_FIELDS if f'id="field-form-{name}"' in content}


def kube_document(**extra) -> dict:
    return {"cloud": "k3s-lab", "project": "alpha", "command": ["python3", "-c", "print(1)"], **extra}


def test_a_local_cloud_shows_no_image_resources_or_volumes(pages, world):
    content = pages("bob").get("/tasks/new").content.decode()
    assert shown_fields(content) == {"secrets", "labels", "workdir", "env"}
    assert 'data-backend="local"' in content and not helpers.csrf_problems(content)


def test_a_kubernetes_cloud_shows_its_fields_and_the_users_recent_images(pages, world, kube, kube_connection):
    task_submit(user=world.bob, document=kube_document(image="python:3.12-slim"))
    task_submit(user=world.bob, document=kube_document(image="busybox:1.36"))
    task_submit(user=world.alice, document=kube_document(image="alice/private:1"))  # not bob's
    response = pages("bob").get("/tasks/new?cloud=k3s-lab")
    content = response.content.decode()
    assert shown_fields(content) == set(CLOUD_FIELDS)
    recent = content[content.index('<datalist id="image-choices">') :].split("</datalist>")[0]
    assert recent.index("busybox:1.36") < recent.index("python:3.12-slim") and "alice/private" not in recent
    assert 'list="image-choices"' in content and not helpers.csrf_problems(content)


def test_changing_the_cloud_refreshes_the_fields_and_keeps_what_was_typed(pages, world, kube, kube_connection):
    client = pages("bob")
    typed = {
        "mode": "form",
        "form-cloud": "k3s-lab",
        "form-project": "alpha",
        "form-command": "echo\nhi",
        "form-image": "python:3.12-slim",
        "form-gpu": "1",
        "form-labels": "team=ml",
        "refresh": "1",
    }
    response = client.post("/tasks/new", typed, HTTP_HX_REQUEST="true")
    content = response.content.decode()
    assert response.status_code == 200 and not Task.objects.exists()
    assert shown_fields(content) == set(CLOUD_FIELDS) and "has-error" not in content  # nothing refused yet
    assert 'value="python:3.12-slim"' in content and "team=ml" in content
    back = client.post("/tasks/new", typed | {"form-cloud": "local"}).content.decode()
    assert shown_fields(back) == {"secrets", "labels", "workdir", "env"}
    # what local does not run travels hidden, so choosing the Kubernetes cloud again gives it back
    assert '<input type="hidden" name="form-image" value="python:3.12-slim"' in back
    assert '<input type="hidden" name="form-gpu" value="1"' in back


def test_the_cloud_and_project_selects_post_the_refresh_with_the_csrf_token(pages, world):
    content = pages("bob").get("/tasks/new").content.decode()
    select = content[content.index('<select name="form-cloud"') :].split(">")[0]
    assert 'hx-post="/tasks/new"' in select and 'hx-include="#submit-form"' in select
    assert 'hx-select="#submit-cloud-fields"' in select
    assert 'name="refresh"' in content  # the button shown without JavaScript
    assert not helpers.csrf_problems(content)


def test_the_form_submits_every_kubernetes_field(pages, world, kube, kube_connection):
    secret_create(user=world.alice, project=world.alpha, name="db-password", value="s3cret-value")
    claim = {"name": "data", "annotations": {"cloudpivot.io/projects": "alpha"}}
    kube.put(PVCS, "tasks", {"metadata": claim, "spec": {"accessModes": ["ReadWriteOnce"]}})
    data = {
        "mode": "form",
        "form-cloud": "k3s-lab",
        "form-project": "alpha",
        "form-name": "every field",
        "form-command": "python3\ntrain.py",
        "form-image": "python:3.12-slim",
        "form-cpu": "0.5",
        "form-memory_mb": "512",
        "form-gpu": "0",
        "form-volumes": "data:/data:ro\n",
        "form-secrets": "db-password=DB_PASSWORD\n",
        "form-env": "EPOCHS=3",
        "form-labels": "team=ml",
        "form-workdir": "/work",
        "form-timeout_seconds": "600",
        "form-retry_limit": "2",
    }
    response = pages("bob").post("/tasks/new", data)
    task = Task.objects.get(name="every field")
    assert response.status_code == 302, response.context["form"].errors
    spec = task.normalized
    assert spec["image"] == "python:3.12-slim" and spec["workdir"] == "/work"
    assert spec["resources"] == {"cpu": 0.5, "memory_mb": 512, "gpu": 0}
    assert spec["volumes"] == [{"claim": "data", "mount_path": "/data", "read_only": True}]
    assert spec["secrets"] == [{"name": "db-password", "env": "DB_PASSWORD"}]
    assert spec["env"] == {"EPOCHS": "3"} and spec["labels"] == {"team": "ml"}
    assert (task.timeout_seconds, task.retry_limit) == (600, 2)


def test_the_clouds_refusals_come_back_next_to_the_field(pages, world, kube, kube_connection):
    secret_create(user=world.alice, project=world.alpha, name="db-password", value="s3cret-value")
    data = {
        "mode": "form",
        "form-cloud": "k3s-lab",
        "form-project": "alpha",
        "form-command": "true",
        "form-retry_limit": "0",
        "form-volumes": "nobodys-claim:/data",
        "form-secrets": "no-such-secret=NOPE",
    }
    client = pages("bob")

    def errors(**changes):
        response = client.post("/tasks/new", data | changes)
        assert response.status_code == 400 and not Task.objects.exists()
        return response.context["form"].errors

    assert "no default image" in errors()["image"][0]  # each refusal in turn, on its own field
    assert "no-such-secret" in errors(**{"form-image": "busybox"})["secrets"][0]
    found = errors(**{"form-secrets": "db-password=DB", "form-image": "busybox"})
    assert found["volumes"][0].startswith("Line 1") and "nobodys-claim" in found["volumes"][0], found


def test_a_field_the_cloud_does_not_run_is_not_sent(pages, world):
    """A GPU typed for a Kubernetes cloud stays hidden on the local one and is not part of the document."""
    data = {"mode": "form", "form-cloud": "local", "form-command": "true", "form-retry_limit": "0"}
    response = pages("bob").post("/tasks/new", data | {"form-gpu": "2", "form-image": "busybox"})
    assert response.status_code == 302
    assert Task.objects.get().spec == {"cloud": "local", "command": ["true"], "retry_limit": 0}


def test_clone_fills_every_field_the_cloud_runs(pages, world, kube, kube_connection):
    secret_create(user=world.alice, project=world.alpha, name="db-password", value="s3cret-value")
    document = kube_document(
        name="to clone",
        image="python:3.12-slim",
        resources={"cpu": 2, "memory_mb": 1024, "gpu": 1},
        secrets=[{"name": "db-password", "env": "DB_PASSWORD"}, {"name": "db-password", "file": "/run/db"}],
        labels={"team": "ml"},
        workdir="/work",
    )
    task, _ = task_submit(user=world.bob, document=document)
    response = pages("bob").get(f"/tasks/new?clone={task.pk}")
    form = response.context["form"]
    assert response.context["mode"] == "form"
    assert form.initial["image"] == "python:3.12-slim" and form.initial["gpu"] == 1 and form.initial["cpu"] == 2
    assert form.initial["secrets"] == "db-password=DB_PASSWORD\ndb-password=/run/db"
    assert form.initial["labels"] == "team=ml" and form.initial["workdir"] == "/work"
    assert 'data-backend="kubernetes"' in response.content.decode()


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"node_selector": {"pool": "gpu"}}, "the form has no node selector field"),
        ({"command": ["python3", "-c", "print(1)\nprint(2)"]}, "an argument with a line break"),
        ({"env": {"MULTI": "a\nb"}}, "a value with a line break"),
    ],
)
def test_clone_opens_the_raw_editor_only_for_what_the_form_cannot_hold(world, kube, kube_connection, extra, why):
    task = Task(connection=kube_connection, project=world.alpha, spec=kube_document(image="busybox", **extra))
    offered = frozenset(
        {"image", "cpu", "memory_mb", "gpu", "volumes", "secrets", "labels", "workdir", "env"} | {"timeout_seconds"}
    )
    assert initial_from_task(task, offered)[2] is True, why
    plain = Task(connection=kube_connection, project=world.alpha, spec=kube_document(image="busybox"))
    assert initial_from_task(plain, offered)[2] is False


def test_clone_of_a_kubernetes_task_for_a_cloud_without_gpus_opens_the_raw_editor(world):
    task = Task(connection=world.local, project=world.alpha, spec={"cloud": "local", "command": ["x"]})
    task.spec["resources"] = {"gpu": 1}
    _, document, needs_raw = initial_from_task(task, frozenset({"env", "labels"}))
    assert needs_raw and json.loads(document)["resources"] == {"gpu": 1}


def test_openstack_images_are_offered_by_name_and_by_id_where_names_are_shared():
    items = [
        {"id": "a1", "name": "ubuntu", "status": "active", "size_bytes": 3 * 1024**3, "disk_format": "qcow2"},
        {"id": "b2", "name": "dup", "status": "active", "size_bytes": None, "disk_format": "raw"},
        {"id": "c3", "name": "dup", "status": "active", "size_bytes": 1024, "disk_format": "raw"},
        {"id": "d4", "name": "broken", "status": "queued"},
    ]
    assert inventory_images(items) == [
        ("b2", "dup (raw)"),
        ("c3", "dup (raw, 1.0 KB)"),
        ("ubuntu", "ubuntu (qcow2, 3.0 GB)"),
    ]


def test_spec_errors_of_the_new_fields_land_on_them():
    from tasks.submit_choices import SubmitChoices

    form = TaskSubmitForm(
        clouds=["k3s-lab"], projects=["alpha"], choices=SubmitChoices(fields=frozenset({"cpu", "volumes", "secrets"}))
    )
    assert form.field_for("resources.cpu", "too many") == ("cpu", "too many")
    assert form.field_for("volumes.1.claim", "bad name") == ("volumes", "Line 2: claim: bad name")
    assert form.field_for("secrets.0", "no such secret") == ("secrets", "Line 1: no such secret")
    assert form.field_for("resources.gpu", "no GPUs") == (None, "resources.gpu: no GPUs")  # not shown: said on top
    assert form.field_for("image", "no image") == (None, "image: no image")


def test_csrf_problems_are_found():
    body = '<body hx-headers=\'{"X-CSRFToken": "abc"}\'>'
    assert not helpers.csrf_problems(body + '<form method="post"><input name="csrfmiddlewaretoken"></form>')
    assert helpers.csrf_problems(body + '<form method="get"><input name="csrfmiddlewaretoken"></form>')
    assert helpers.csrf_problems(body + '<a href="/x?csrfmiddlewaretoken=abc">x</a>')
    assert helpers.csrf_problems(
        body + '<form method="post"><input name="csrfmiddlewaretoken"><button formmethod="get">x</button></form>'
    )
    assert helpers.csrf_problems('<body><select hx-post="/tasks/new"></select>')
    assert not helpers.csrf_problems(body + '<select hx-post="/tasks/new"></select>')


def test_the_api_says_which_task_fields_each_cloud_runs(api, world, kube, kube_connection):
    local = api("bob").get("/api/v1/clouds/local/capabilities").json()["tasks"]
    assert local == {
        "fields": ["env", "labels", "retry_limit", "secrets", "timeout_seconds", "workdir"],
        "image_choices": "",
        "defaults": {},
    }
    kube_tasks = api("bob").get("/api/v1/clouds/k3s-lab/capabilities").json()["tasks"]
    assert {"image", "cpu", "memory_mb", "gpu", "volumes", "node_selector"} <= set(kube_tasks["fields"])
    assert kube_tasks["image_choices"] == "recent" and kube_tasks["defaults"] == {"cpu": 1, "memory_mb": 1024}
