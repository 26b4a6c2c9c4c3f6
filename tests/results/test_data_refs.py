"""Data references in the task document (`data`, docs/data.md): the one shape, what each cloud mounts, and the
`local` cloud's allowed roots, as a submitter meets them through POST /api/v1/tasks."""

from __future__ import annotations

import json
import os

import pytest

from clusters.backends.base import AttemptRef
from clusters.backends.kubernetes.manifest import job_manifest
from clusters.connection_options import option_errors
from clusters.models import CloudConnection
from tasks.models import Task
from tests.builders import hello_spec
from tests.clusters.kube_api import PVCS

URL = "/api/v1/tasks"


def post(api, user="bob", **spec):
    return api(user).post(URL, hello_spec(**spec), format="json")


def refused(response) -> dict[str, str]:
    assert response.status_code == 400, response.content
    return {error["field"]: error["message"] for error in response.json()["errors"]}


@pytest.fixture
def roots(tmp_path, world):
    """Two allowed roots on the `local` connection, a directory in each, and one outside both."""
    inside, other, outside = tmp_path / "datasets", tmp_path / "more", tmp_path / "private"
    for path in (inside / "mnist", other, outside):
        path.mkdir(parents=True)
    (inside / "mnist" / "train.csv").write_text("1,2\n")
    world.local.options = {**world.local.options, "data_roots": [str(inside), str(other)]}
    world.local.save(update_fields=["options"])
    return inside, other, outside


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ([{"kind": "dir", "ref": "/srv/a"}, {"kind": "dir", "ref": "relative/dir"}], "data.1.ref", "absolute path"),
        ([{"kind": "dir", "ref": "/srv/../etc"}], "data.0.ref", "'..'"),
        ([{"kind": "dir"}], "data.0.ref", "required"),
        ([{"kind": "nfs", "ref": "/srv"}], "data.0.kind", "not a valid choice"),
        ([{"kind": "pvc", "ref": "data"}], "data.0.path", "needs `path`"),
        ([{"kind": "pvc", "ref": "Not_A_Claim", "path": "/data"}], "data.0.ref", "PersistentVolumeClaim name"),
        ([{"kind": "pvc", "ref": "data", "path": "data"}], "data.0.path", "absolute path"),
        ([{"kind": "pvc", "ref": "data", "path": "/data/../etc"}], "data.0.path", "'..'"),
        ([{"kind": "dir", "ref": "/srv", "mode": "rwx"}], "data.0.mode", "not a valid choice"),
        ([{"kind": "scratch"}], "data.0.size_gb", "size"),
        ([{"kind": "volume", "ref": "vol-1", "size_gb": 5}], "data.0.size_gb", "only for scratch"),
        ([{"kind": "dir", "ref": "/srv", "name": "in-puts"}], "data.0.name", "letters, digits and '_'"),
        ([{"kind": "dir", "ref": "/srv", "where": "x"}], "data.0.where", "unknown field"),
        ([{"kind": "dir", "ref": "/a", "name": "x"}, {"kind": "dir", "ref": "/b", "name": "X"}], "data", "twice"),
        ([{"kind": "dir", "ref": f"/srv/{i}"} for i in range(21)], "data", "20"),
        ({"kind": "dir", "ref": "/srv"}, "data", "list"),
    ],
)
def test_it_refuses_a_wrong_reference_naming_the_field(api, world, data, field, words):
    errors = refused(post(api, data=data))
    assert field in errors, errors
    assert words in errors[field]
    assert not Task.objects.exists()


def test_a_local_task_may_reference_a_directory_inside_an_allowed_root(api, world, roots):
    inside, other, _ = roots
    data = [{"kind": "dir", "ref": str(inside / "mnist"), "name": "train"}, {"kind": "dir", "ref": str(other)}]
    response = post(api, data=data)
    assert response.status_code == 201, response.content
    kept = Task.objects.get().normalized["data"]
    assert kept == [
        {"kind": "dir", "ref": os.path.realpath(inside / "mnist"), "name": "train", "mode": "ro"},
        {"kind": "dir", "ref": os.path.realpath(other), "mode": "ro"},
    ]


def test_a_local_task_may_not_reference_what_lies_outside_every_root(api, world, roots, tmp_path):
    inside, _, outside = roots
    (inside / "escape").symlink_to(outside)  # inside by its name, outside once resolved
    cases = {
        str(outside): "outside the directories the local cloud allows",
        str(inside / "escape"): f"(it leads to {os.path.realpath(outside)})",
        str(inside / "missing"): "no such directory",
        str(inside / "mnist" / "train.csv"): "no such directory",  # a file, not a directory
        str(tmp_path / "datasets-2"): "outside",  # a name that only starts like a root
    }
    for ref, words in cases.items():
        errors = refused(post(api, data=[{"kind": "dir", "ref": ref}]))
        assert words in errors["data.0.ref"], (ref, errors)
    errors = refused(post(api, data=[{"kind": "dir", "ref": str(inside / "mnist"), "path": "/inputs"}]))
    assert "remove `path`" in errors["data.0.path"]
    assert not Task.objects.exists()


def test_another_connections_root_is_not_this_connections(api, world, roots, tmp_path):
    """Only the roots of the connection the task runs on count, whichever connections the project may use."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    lab = CloudConnection.objects.create(
        cloud_id="local-lab",
        backend="local",
        options={"runs_dir": str(tmp_path / "runs2"), "data_roots": [str(theirs)]},
    )
    lab.projects.add(world.alpha)
    errors = refused(post(api, data=[{"kind": "dir", "ref": str(theirs)}]))  # on `local`, whose roots are others
    assert "outside the directories the local cloud allows" in errors["data.0.ref"]
    assert post(api, cloud="local-lab", data=[{"kind": "dir", "ref": str(theirs)}]).status_code == 201


def test_a_local_connection_without_roots_allows_no_directory(api, world, tmp_path):
    errors = refused(post(api, data=[{"kind": "dir", "ref": str(tmp_path)}]))
    assert "its admin has set no `data_roots`" in errors["data.0.ref"]


def test_local_mounts_only_directories_and_says_what_it_can(api, world):
    errors = refused(post(api, data=[{"kind": "dir", "ref": "/srv"}, {"kind": "pvc", "ref": "data", "path": "/d"}]))
    assert errors["data.1.kind"] == "the local cloud local cannot mount 'pvc' references; it can mount: 'dir'"


def test_data_roots_must_be_absolute_directories():
    assert option_errors("local", {"data_roots": ["/srv/datasets"]}) == []
    assert option_errors("local", {"data_roots": ["srv"]})[0][0] == "data_roots"
    assert option_errors("local", {"data_roots": ["/srv/../etc"]})[0][0] == "data_roots"
    assert option_errors("local", {"data_roots": "/srv"})[0][0] == "data_roots"


def test_the_env_may_not_take_the_names_the_data_is_given_at(api, world):
    errors = refused(post(api, env={"CLOUDPIVOT_DATA_0": "/x"}, data=[{"kind": "dir", "ref": "/srv"}]))
    assert "CLOUDPIVOT_DATA_" in errors["env"]


# ---------------------------------------------------------------------------- Kubernetes
def kube_post(api, **spec):
    return api("bob").post(
        URL, {"cloud": "k3s-lab", "image": "busybox:1.36", "command": ["true"], **spec}, format="json"
    )


def test_kubernetes_mounts_a_pvc_reference_as_it_mounts_volumes(api, kube, kube_connection):
    kube.put(PVCS, "tasks", {"metadata": {"name": "alpha-data", "annotations": {"cloudpivot.io/projects": "alpha"}}})
    kube.put(PVCS, "tasks", {"metadata": {"name": "beta-data", "annotations": {"cloudpivot.io/projects": "beta"}}})
    data = [{"kind": "pvc", "ref": "alpha-data", "path": "/data", "name": "train"}]
    response = kube_post(api, data=data)
    assert response.status_code == 201, response.content
    # The same claim check as `volumes`, naming the reference's field.
    errors = refused(kube_post(api, data=[{"kind": "pvc", "ref": "beta-data", "path": "/data"}]))
    assert errors["data.0.ref"].startswith("project alpha may not use PersistentVolumeClaim beta-data")
    errors = refused(kube_post(api, volumes=[{"claim": "alpha-data", "mount_path": "/data"}], data=data))
    assert "mounted twice" in errors["data"]


def test_the_job_mounts_a_pvc_reference_and_names_it_to_the_program(kube_connection):
    spec = {
        "image": "busybox",
        "command": ["true"],
        "env": {},
        "resources": {"gpu": 0},
        "volumes": [{"claim": "old", "mount_path": "/old", "read_only": False}],
        "data": [{"kind": "pvc", "ref": "alpha-data", "path": "/data", "mode": "ro", "name": "train"}],
    }
    attempt = AttemptRef(task_id="t", attempt_id=1, number=1, external_name="cp-1", external_ref="", spec=spec)
    job = job_manifest(attempt, namespace="tasks", installation="default", options={})
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["volumeMounts"] == [
        {"name": "vol-0", "mountPath": "/old", "readOnly": False},
        {"name": "vol-1", "mountPath": "/data", "readOnly": True},
    ]
    assert pod["volumes"][1] == {
        "name": "vol-1",
        "persistentVolumeClaim": {"claimName": "alpha-data", "readOnly": True},
    }
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env == {"CLOUDPIVOT_DATA_0": "/data", "CLOUDPIVOT_DATA_TRAIN": "/data"}


def test_kubernetes_refuses_a_host_directory_naming_the_kind(api, kube_connection):
    errors = refused(kube_post(api, data=[{"kind": "dir", "ref": "/srv/datasets"}]))
    assert errors["data.0.kind"] == ("the Kubernetes cloud k3s-lab cannot mount 'dir' references; it can mount: 'pvc'")
    assert not Task.objects.exists()


def test_the_submit_pages_document_editor_makes_the_same_checks(pages, world, roots):
    """The portal's submit form goes through the same serializer and cloud checks as the API."""
    inside, _, outside = roots
    client = pages("bob")
    document = {"cloud": "local", "command": ["true"], "data": [{"kind": "dir", "ref": str(outside)}]}
    response = client.post("/tasks/new", {"mode": "raw", "raw-document": json.dumps(document)})
    assert response.status_code == 400 and not Task.objects.exists()
    (error,) = response.context["raw"].errors["document"]
    assert error.startswith("data.0.ref: is outside the directories the local cloud allows"), error
    document["data"] = [{"kind": "dir", "ref": str(inside / "mnist")}]
    assert client.post("/tasks/new", {"mode": "raw", "raw-document": json.dumps(document)}).status_code == 302
    assert Task.objects.get().normalized["data"][0]["ref"] == os.path.realpath(inside / "mnist")
