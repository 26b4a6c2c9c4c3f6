"""Declared outputs and staged-in data of OpenStack tasks, in the development OpenStack's Swift (docs/data.md).

The task runs in a VM stand-in (the host program the user data carries, run as it says); its supervisor PUTs
the files to Swift through the attempt's temporary URL; the API's links are Swift's temporary GET URLs. The
bytes never pass through CloudPivot, and they stay after the server is gone.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import openstack
import pytest

from cloudpivot.exceptions import InvalidSpec
from clusters.backends import get_backend
from results.models import OutputManifest
from results.provenance import task_provenance
from results.selectors import task_outputs
from tasks.services import reconcile_pass
from tasks.services.actions import task_cancel
from tasks.services.logs import log_read
from tasks.services.submission import task_submit
from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

OPENSTACK = Path(__file__).resolve().parents[2] / "deploy" / "dev" / "openstack"
WRITE = (
    "import os, sys; os.makedirs('plots', exist_ok=True); "
    "open('model.bin','wb').write(bytes(range(256)) * 4096); "
    "open('plots/a.txt','w').write('first plot\\n'); "
)


def started(os_live, vms, document):
    task, _ = task_submit(user=os_live.world.bob, document={"cloud": "os-dev", **document})
    task = helpers.drive(task, {"STARTING"}, timeout=60)
    attempt = task.attempts.get()
    server = helpers.wait_for(
        lambda: (s := os_live.conn.compute.get_server(attempt.external_ref)).status == "ACTIVE" and s,
        timeout=60,
        interval=0.3,
        what="the server ACTIVE",
    )
    return task, vms(os_live.conn, server.id)


def download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.read()


def swift_proxy(action: str) -> None:
    """Stop or start the dev cloud's Swift proxy (its recorded process group), as an outage of the store."""
    command = (
        "stop_pid swift-proxy"
        if action == "stop"
        else (
            "start_bg swift-proxy swift-proxy-server $S/etc/swift/proxy-server.conf -v && "
            'wait_http "http://$CP_OS_HOST:$CP_OS_SWIFT_PORT/healthcheck" 60'
        )
    )
    subprocess.run(["bash", "-c", f". {OPENSTACK}/env.sh && . {OPENSTACK}/lib.sh && {command}"], check=True)


def test_outputs_go_to_swift_and_download_from_it_after_the_server_is_gone(os_live, vms):
    task, vm = started(
        os_live, vms, {"command": ["python3", "-c", WRITE], "outputs": [{"path": "model.bin"}, {"path": "plots"}]}
    )
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=90)
    assert task.state == "SUCCEEDED", task.state_reason
    # the execution got a prefix-scoped temporary URL, never the project's credentials
    assert "password" not in vm.user_data and "temp_url_sig" not in vm.user_data
    manifest = OutputManifest.objects.get(attempt__task=task)
    assert (manifest.store, manifest.state) == ("swift", "complete")
    assert manifest.location.endswith(f"/cloudpivot-results/cp/{task.attempts.get().external_name}/")
    helpers.wait_for(
        lambda: reconcile_pass() is not None and task.attempts.get().cleanup_state == "done",
        timeout=60,
        what="the server removed",
    )

    outputs = task_outputs(user=os_live.world.bob, task_id=task.pk)
    files = {item["name"]: item for item in outputs["files"]}
    assert sorted(files) == ["model.bin", "plots/a.txt"]
    model = bytes(range(256)) * 4096
    assert files["model.bin"]["bytes"] == len(model)
    assert files["model.bin"]["sha256"] == hashlib.sha256(model).hexdigest()
    assert files["model.bin"]["url"].startswith("http://127.0.0.1:")  # Swift's, not CloudPivot's
    assert "temp_url_sig=" in files["model.bin"]["url"]
    assert download(files["model.bin"]["url"]) == model
    assert download(files["plots/a.txt"]["url"]) == b"first plot\n"
    # the provenance bundle names the image that booted by its Glance hash, and the outputs with their checksums
    bundle = task_provenance(user=os_live.world.bob, task_id=task.pk)["bundle"]
    image = os_live.conn.image.get_image(task.normalized["image_id"])
    assert bundle["image"]["digest"] == f"{image.hash_algo}:{image.hash_value}"
    assert {f["name"]: f["sha256"] for f in bundle["outputs"]["files"]}["model.bin"] == files["model.bin"]["sha256"]
    # a link names one object: the signature does not open the attempt's other files
    with pytest.raises(urllib.error.HTTPError) as refused:
        download(files["model.bin"]["url"].replace("model.bin", "plots/a.txt"))
    assert refused.value.code == 401


def test_an_upload_outlives_a_20_s_outage_of_the_store(os_live, vms):
    task, _vm = started(
        os_live,
        vms,
        {"command": ["python3", "-c", WRITE + "import time; time.sleep(3)"], "outputs": [{"path": "model.bin"}]},
    )
    task = helpers.drive(task, {"RUNNING"}, timeout=60)
    swift_proxy("stop")
    try:
        time.sleep(20)  # the program ends meanwhile; its supervisor keeps retrying the PUT
        assert not OutputManifest.objects.filter(attempt__task=task).exists()
    finally:
        swift_proxy("start")
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=120)
    assert task.state == "SUCCEEDED" and task.exit_code == 0, task.state_reason
    outputs = task_outputs(user=os_live.world.bob, task_id=task.pk)
    assert outputs["state"] == "complete", outputs
    assert download(outputs["files"][0]["url"]) == bytes(range(256)) * 4096


def test_a_cancelled_tasks_outputs_are_uploaded_as_far_as_they_exist(os_live, vms):
    task, _vm = started(
        os_live,
        vms,
        {
            "command": ["python3", "-c", WRITE + "import time; time.sleep(600)"],
            "outputs": [{"path": "model.bin"}, {"path": "never-written.txt"}],
        },
    )
    task = helpers.drive(task, {"RUNNING"}, timeout=60)
    time.sleep(1)  # the program has written its file
    task_cancel(task_id=task.pk, user=os_live.world.bob)
    task = helpers.drive(task, {"CANCELLED", "FAILED", "UNKNOWN"}, timeout=90)
    assert task.state == "CANCELLED", task.state_reason
    outputs = task_outputs(user=os_live.world.bob, task_id=task.pk)
    files = {item["name"]: item for item in outputs["files"]}
    assert files["model.bin"]["state"] == "stored"
    assert files["never-written.txt"]["state"] == "missing"
    assert outputs["state"] == "incomplete"
    assert download(files["model.bin"]["url"]) == bytes(range(256)) * 4096


def test_retention_removes_the_objects_and_a_cloud_without_a_container_refuses_outputs(os_live, vms):
    backend = get_backend(os_live.connection)
    store = backend.output_store()
    target = store.upload_target("cp/retention-check/", 60)
    request = urllib.request.Request(target["url"] + "x.txt?" + target["query"], data=b"x", method="PUT")
    urllib.request.urlopen(request, timeout=30).close()
    assert store.delete_prefix("cp/retention-check/") == 1
    os_live.connection.options = {**os_live.connection.options, "results_container": ""}
    errors = get_backend(os_live.connection).validate({"command": ["true"], "outputs": [{"path": "x"}]})
    assert [error["field"] for error in errors] == ["outputs"]
    assert "results_container" in errors[0]["message"]


# ---------------------------------------------------------------------------- data staged in (`object`)
@pytest.fixture
def inputs(os_live):
    """A container of the project's own with objects under two prefixes; removed at the end."""
    store, name = os_live.conn.object_store, f"inputs-{secrets.token_hex(3)}"
    store.create_container(name=name)
    objects = {"set1/a.txt": b"alpha\n", "set1/sub/b.bin": bytes(range(256)) * 100, "other/c.txt": b"not staged"}
    for key, data in objects.items():
        store.upload_object(container=name, name=key, data=data)
    yield SimpleNamespace(name=name, objects=objects)
    with contextlib.suppress(openstack.exceptions.NotFoundException):  # a test may have removed it already
        for item in list(store.objects(name)):
            store.delete_object(item, container=name)
        store.delete_container(name, ignore_missing=True)


def test_an_object_prefix_is_staged_in_before_the_program_starts(os_live, vms, inputs, tmp_path):
    stage = tmp_path / "stage"  # where the VM stand-in's program finds it (an absolute path, as in a VM)
    data = [{"kind": "object", "ref": f"{inputs.name}/set1/", "path": str(stage), "name": "inputs"}]
    script = 'cat "$CLOUDPIVOT_DATA_INPUTS/a.txt"; cd "$CLOUDPIVOT_DATA_0" && find . -type f | sort'
    task, _vm = started(os_live, vms, {"command": ["sh", "-c", script], "data": data})
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=90)
    assert task.state == "SUCCEEDED", task.state_reason
    assert log_read(task=task)["data"] == "alpha\n./a.txt\n./sub/b.bin\n"  # not the other prefix
    assert (stage / "sub" / "b.bin").read_bytes() == inputs.objects["set1/sub/b.bin"]
    record = task.attempts.get().storage_references.get()
    assert (record.kind, record.role, record.ref) == ("object", "borrowed", f"{inputs.name}/set1/")


def test_a_missing_container_is_refused_and_one_gone_since_fails_the_attempt_in_words(os_live, vms, inputs, tmp_path):
    data = [{"kind": "object", "ref": "no-such-container/x/", "path": str(tmp_path / "in")}]
    with pytest.raises(InvalidSpec) as refused:
        task_submit(user=os_live.world.bob, document={"cloud": "os-dev", "command": ["true"], "data": data})
    assert refused.value.errors[0]["field"] == "data.0.ref"
    assert "no container 'no-such-container'" in refused.value.errors[0]["message"]
    results = [{"kind": "object", "ref": "cloudpivot-results/cp/", "path": str(tmp_path / "in")}]
    with pytest.raises(InvalidSpec) as refused:
        task_submit(user=os_live.world.bob, document={"cloud": "os-dev", "command": ["true"], "data": results})
    assert refused.value.errors[0]["field"] == "data.0.ref"

    data[0]["ref"] = f"{inputs.name}/set1/"
    task, _ = task_submit(user=os_live.world.bob, document={"cloud": "os-dev", "command": ["true"], "data": data})
    store = os_live.conn.object_store
    for item in list(store.objects(inputs.name)):
        store.delete_object(item, container=inputs.name)
    store.delete_container(inputs.name)
    task = helpers.drive(task, {"STARTING"}, timeout=60)
    server = helpers.wait_for(
        lambda: (s := os_live.conn.compute.get_server(task.attempts.get().external_ref)).status == "ACTIVE" and s,
        timeout=60,
        what="the server ACTIVE",
    )
    vms(os_live.conn, server.id)
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=90)
    assert task.state == "FAILED", task.state_reason
    assert "data.0" in task.state_reason and "not found" in task.state_reason, task.state_reason


def test_a_project_reads_only_its_own_containers(os_live, inputs, tmp_path):
    store = os_live.conn.object_store
    document = {
        "cloud": "os-dev",
        "command": ["true"],
        "data": [{"kind": "object", "ref": f"{inputs.name}/set1/", "path": str(tmp_path / "in")}],
    }
    # alone on the connection, alpha may read an unmarked container of the account
    task, _ = task_submit(user=os_live.world.bob, document=document)
    task_cancel(task_id=task.pk, user=os_live.world.bob)
    # once the connection serves beta too, a container must say whose it is
    os_live.connection.projects.add(os_live.world.beta)
    with pytest.raises(InvalidSpec) as refused:
        task_submit(user=os_live.world.bob, document=document)
    assert refused.value.errors[0]["field"] == "data.0.ref"
    assert f"X-Container-Meta-Cloudpivot-Project: alpha on '{inputs.name}'" in refused.value.errors[0]["message"]
    store.set_container_metadata(inputs.name, **{"cloudpivot-project": "beta"})
    with pytest.raises(InvalidSpec) as refused:
        task_submit(user=os_live.world.bob, document=document)
    assert refused.value.errors[0]["message"] == f"the container '{inputs.name}' is another project's"
    store.set_container_metadata(inputs.name, **{"cloudpivot-project": "alpha"})
    task, _ = task_submit(user=os_live.world.bob, document=document)
    assert task.state == "PENDING"
