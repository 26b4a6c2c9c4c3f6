"""The OpenStack backend against real Keystone, Glance, Placement, Neutron and Nova (fake virt driver).

Tasks go through the real services (submission, admission, the reconcile pass), the real SDK talks HTTP to
the real OpenStack APIs, and the VM's host program is the one the user data Nova returns carries, run as it says.
"""

from __future__ import annotations

import base64
import os
import signal

import pytest
from django.core.management import CommandError, call_command

from clusters.backends import get_backend
from clusters.backends.openstack import installation_tag, runner_never_reported
from tasks.compare import attempts_annotated
from tasks.models import Task
from tasks.services import reconcile_pass
from tasks.services.actions import task_cancel
from tasks.services.attempts import attempt_ref, attempt_start
from tasks.services.logs import log_read
from tasks.services.submission import task_submit
from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def spec(command, **extra):
    return {"cloud": "os-dev", "command": command, **extra}


def state_changes(task: Task) -> list[str]:
    return list(task.events.filter(type="state").order_by("seq").values_list("data__to", flat=True))


def server_of(os_live, task: Task):
    attempt = task.attempts.get()
    return os_live.conn.compute.get_server(attempt.external_ref)


def wait_status(os_live, server_id: str, status: str, timeout: float = 60):
    def reached():
        server = os_live.conn.compute.get_server(server_id)
        return server if server.status == status and not server.task_state else None

    return helpers.wait_for(reached, timeout=timeout, interval=0.3, what=f"server {server_id} {status}")


def servers_named(os_live, name: str) -> list:
    return [s for s in os_live.conn.compute.servers(name=f"^{name}$", tags=installation_tag()) if s.name == name]


def started(os_live, document) -> tuple[Task, object]:
    task, _ = task_submit(user=os_live.world.bob, document=document)
    task = helpers.drive(task, {"STARTING"}, timeout=60)
    server = wait_status(os_live, task.attempts.get().external_ref, "ACTIVE")
    return task, server


# ---------------------------------------------------------------------------- the life of a task
def test_a_task_runs_in_a_vm_and_succeeds_with_the_runners_log_and_exit_code(os_live, vms):
    task, server = started(os_live, spec(["python3", "-c", "print('hello from the VM')"]))
    attempt = task.attempts.get()
    assert server.name == attempt.external_name
    assert server.metadata == {
        "cloudpivot_task": str(task.pk),
        "cloudpivot_attempt": attempt.external_name,
        "cloudpivot_installation": installation_tag().removeprefix("cloudpivot-"),
    }
    assert installation_tag() in server.tags
    assert task.state == "STARTING"  # ACTIVE is not running
    reconcile_pass()
    task.refresh_from_db()
    assert task.state == "STARTING"

    vm = vms(os_live.conn, server.id)
    assert "cpr_" not in vm.user_data  # the attempt credential is never in user data
    assert vm.config["server_url"] == os_live.daphne.url
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=60)
    assert task.state == "SUCCEEDED", task.state_reason
    assert task.exit_code == 0
    assert log_read(task=task)["data"] == "hello from the VM\n"
    assert state_changes(task) == ["SUBMITTING", "STARTING", "RUNNING", "SUCCEEDED"]
    # the bootstrap secret was exchanged: deleted in the VM, the credential stored root-only
    assert not (vm.root / "etc/cloudpivot/bootstrap").exists()
    credential = vm.root / "var/lib/cloudpivot/credential"
    assert oct(credential.stat().st_mode & 0o777) == "0o600"
    assert vm.process.wait(timeout=30) == 0

    # retention "delete": cleanup removes the server, and is done once the server is gone
    def cleaned():
        reconcile_pass()
        attempt.refresh_from_db()
        return attempt.cleanup_state == "done"

    helpers.wait_for(cleaned, timeout=60, interval=0.3, what="cleanup done")
    # Nova lists a deleted server (status DELETED) for a moment before it is gone.
    helpers.wait_for(lambda: not servers_named(os_live, attempt.external_name), timeout=30, what="the server gone")


def test_a_non_zero_exit_fails_the_task(os_live, vms):
    task, server = started(os_live, spec(["python3", "-c", "import sys; print('bad'); sys.exit(3)"]))
    vms(os_live.conn, server.id)
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=60)
    assert task.state == "FAILED" and task.exit_code == 3, task.state_reason
    assert "exited with code 3" in task.state_reason
    assert log_read(task=task)["data"] == "bad\n"


def test_cancel_stops_the_program_through_the_runner_then_the_server_goes(os_live, vms):
    task, server = started(os_live, spec(["sleep", "600"]))
    vms(os_live.conn, server.id)
    task = helpers.drive(task, {"RUNNING"}, timeout=60)
    task_cancel(task_id=task.pk, user=os_live.world.bob)
    task = helpers.drive(task, {"CANCELLED", "UNKNOWN", "FAILED"}, timeout=60)
    assert task.state == "CANCELLED", task.state_reason
    assert state_changes(task) == ["SUBMITTING", "STARTING", "RUNNING", "CANCELLING", "CANCELLED"]
    helpers.wait_for(
        lambda: reconcile_pass() is not None and not servers_named(os_live, server.name),
        timeout=60,
        what="the server deleted",
    )


def test_a_timeout_stops_the_program_and_ends_timed_out(os_live, vms):
    task, server = started(os_live, spec(["sleep", "600"], timeout_seconds=2))
    vms(os_live.conn, server.id)
    task = helpers.drive(task, {"TIMED_OUT", "UNKNOWN", "FAILED", "SUCCEEDED"}, timeout=60)
    assert task.state == "TIMED_OUT", task.state_reason
    assert "timeout of 2 s" in task.state_reason


def test_a_runner_that_does_not_stop_the_program_gets_its_server_deleted(os_live, vms, settings):
    settings.STOP_WINDOW_SECONDS = 1
    task, server = started(os_live, spec(["sleep", "600"]))
    vm = vms(os_live.conn, server.id)
    task = helpers.drive(task, {"RUNNING"}, timeout=60)
    os.killpg(vm.process.pid, signal.SIGSTOP)  # a hung Runner: hears nothing, stops nothing
    try:
        task_cancel(task_id=task.pk, user=os_live.world.bob)
        task = helpers.drive(task, {"CANCELLED", "UNKNOWN"}, timeout=60)
    finally:
        os.killpg(vm.process.pid, signal.SIGKILL)
    assert task.state == "CANCELLED", task.state_reason
    assert "stopped by force" in task.state_reason
    helpers.wait_for(lambda: not servers_named(os_live, server.name), timeout=30, what="the server gone")


# ---------------------------------------------------------------------------- what the cloud shows
def test_a_server_in_error_before_the_runner_spoke_fails_the_task_with_novas_fault(os_live, settings):
    os_live.connection.options["flavor"] = "cp.nohost"  # more disk than the fake hypervisor has: NoValidHost
    os_live.connection.save()
    task, _ = task_submit(user=os_live.world.bob, document=spec(["true"]))
    task = helpers.drive(task, {"UNKNOWN", "FAILED", "SUCCEEDED"}, timeout=90)
    # The program never ran (no Runner contact): FAILED at once, not after the heartbeat deadline.
    assert task.state == "FAILED" and "No valid host was found" in task.state_reason
    assert task.attempts_count == 1
    # The retry suggestion names the class; the flavor is the connection's, so it advises instead of changing.
    (attempt,) = attempts_annotated(task, list(task.attempts.all()))
    assert attempt.suggestion["failure_class"] == "no_valid_host" and attempt.suggestion["field"] is None


def test_a_runner_that_never_calls_fails_the_task_with_the_console_tail(os_live, settings):
    task, server = started(os_live, spec(["true"]))
    os_live.connection.options["boot_deadline_seconds"] = 1  # now, so the task is seen STARTING first
    os_live.connection.save()
    attempt = task.attempts.get()
    backend = get_backend(os_live.connection)

    def deadline_passed():
        (observation,) = backend.observe([attempt_ref(attempt)])
        return observation if observation.evidence.get("boot_deadline_passed") else None

    observation = helpers.wait_for(deadline_passed, timeout=30, what="the boot deadline")
    assert observation.phase == "pending" and observation.evidence["server_status"] == "ACTIVE"
    verdict = runner_never_reported(backend, attempt_ref(attempt), observation, runner_contact_at=None)
    assert verdict["reason"].startswith("the Runner never reported")
    assert "FAKE CONSOLE OUTPUT" in verdict["console_tail"]  # the fake driver's console, read from Nova
    assert runner_never_reported(backend, attempt_ref(attempt), observation, runner_contact_at="now") is None
    task = helpers.drive(task, {"UNKNOWN", "FAILED", "RUNNING"}, timeout=30)
    assert task.state == "FAILED" and task.state_reason.startswith("the Runner never reported")
    assert "FAKE CONSOLE OUTPUT" in task.events.get(type="console").data["tail"]


def test_a_server_deleted_behind_cloudpivots_back_makes_the_task_unknown_not_a_rerun(os_live, vms, settings):
    settings.RUNNER_HEARTBEAT_DEADLINE_SECONDS = 3
    task, server = started(os_live, spec(["sleep", "600"]))
    vm = vms(os_live.conn, server.id)
    task = helpers.drive(task, {"RUNNING"}, timeout=60)
    os_live.conn.compute.delete_server(server.id)
    os.killpg(vm.process.pid, signal.SIGKILL)  # the VM, and its Runner, are gone
    helpers.wait_for(lambda: not servers_named(os_live, server.name), timeout=60, what="the server gone")
    attempt = task.attempts.get()
    (observation,) = get_backend(os_live.connection).observe([attempt_ref(attempt)])
    assert observation.phase == "gone" and not observation.exists
    assert "deleted outside CloudPivot" in observation.reason
    task = helpers.drive(task, {"UNKNOWN", "FAILED", "SUCCEEDED"}, timeout=30)
    assert task.state == "UNKNOWN"
    assert "deleted outside CloudPivot" in task.state_reason
    assert task.attempts_count == 1
    assert not servers_named(os_live, server.name)  # nothing re-created behind the user's back


def test_a_crash_between_create_and_record_leaves_exactly_one_server(os_live, monkeypatch):
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)  # the start job is queued, not run: a worker "crashes"
    task, _ = task_submit(user=os_live.world.bob, document=spec(["true"]))
    from tasks.services.admission import admit_all

    admit_all()
    attempt = task.attempts.get()
    backend = get_backend(os_live.connection)
    first = backend.ensure_started(attempt_ref(attempt))  # "create sent" ... and the worker dies here
    assert not first.adopted
    attempt.refresh_from_db()
    assert attempt.external_ref == ""
    monkeypatch.setattr(Conf, "SYNC", True)
    attempt_start(attempt_id=attempt.pk)  # the retried start
    attempt.refresh_from_db()
    task.refresh_from_db()
    assert task.state == "STARTING"
    assert attempt.external_ref == first.ref
    assert task.events.filter(type="state", data__to="STARTING").get().message.startswith("adopted")
    assert [s.id for s in servers_named(os_live, attempt.external_name)] == [first.ref]


# ---------------------------------------------------------------------------- the bootstrap secret
def test_the_bootstrap_secret_works_until_its_credential_has_called(os_live):
    import json
    import urllib.error
    import urllib.request

    task, server = started(os_live, spec(["true"]))
    user_data = base64.b64decode(os_live.conn.compute.get_server(server.id).user_data).decode()
    import yaml

    files = {f["path"]: f["content"] for f in yaml.safe_load(user_data)["write_files"]}
    secret = files["/etc/cloudpivot/bootstrap"]
    assert secret.startswith("cpb_")

    def post(path, token, method="POST", body=b"{}"):
        request = urllib.request.Request(
            os_live.daphne.url + path,
            method=method,
            data=body if method == "POST" else None,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    sync = json.dumps({"protocol": 2, "agent": {"name": "vm"}, "known": []}).encode()
    assert post("/runner/v2/sync", secret, body=sync)[0] == 401  # a bootstrap secret is no credential
    assert post("/runner/v2/bootstrap", secret, "GET")[0] == 405  # and only a POST spends it
    assert post("/runner/v1/bootstrap", secret)[0] == 401  # nor does v1 take it: its attempt is of this release
    status, answer = post("/runner/v2/bootstrap", secret)
    assert status == 200 and answer["credential"] == attempt_ref(task.attempts.get()).runner_credential
    # An answer lost on the way (a timeout, a web process restarting) is asked for again: the same credential.
    status, again = post("/runner/v2/bootstrap", secret)
    assert status == 200 and again["credential"] == answer["credential"]
    assert post("/runner/v2/sync", answer["credential"], body=sync)[0] == 200
    # The credential has called: now the secret is spent.
    status, spent = post("/runner/v2/bootstrap", secret)
    assert status == 401 and "already used" in spent["message"]
    assert post("/runner/v2/bootstrap", answer["credential"])[0] == 401  # a credential is no bootstrap secret


# ---------------------------------------------------------------------------- check_cloud and inventory
def test_check_cloud_says_everything_is_there(os_live, capsys):
    call_command("check_cloud", "os-dev")
    out = capsys.readouterr().out
    assert "ok      authentication (Keystone)" in out
    for line in ("compute service (Nova)", "image service (Glance)", "network service (Neutron)", "flavor 'cp.tiny'"):
        assert f"ok      {line}" in out
    assert "ok      block-storage service (Cinder)" in out  # the dev cloud's Cinder (sparse-file volumes)
    assert "everything CloudPivot needs is there" in out


def test_check_cloud_says_in_words_what_is_missing(os_live, capsys):
    os_live.connection.options.update(flavor="no-such-flavor", image="no-such-image")
    os_live.connection.save()
    with pytest.raises(CommandError) as error:
        call_command("check_cloud", "os-dev")
    assert "missing 2 thing(s)" in str(error.value)
    assert "MISSING flavor 'no-such-flavor'" in capsys.readouterr().out


def test_the_inventory_shows_flavors_images_servers_and_quota_usage(os_live, api):
    task, server = started(os_live, spec(["true"]))
    os_live.world.alpha.connections.add(os_live.connection)
    client = api("alice")
    flavors = client.get("/api/v1/clouds/os-dev/resources/flavors").json()
    assert "cp.tiny" in [f["name"] for f in flavors["items"]]
    images = client.get("/api/v1/clouds/os-dev/resources/images").json()
    assert "cp-runner-fake" in [i["name"] for i in images["items"]]
    servers = client.get("/api/v1/clouds/os-dev/resources/servers").json()
    ours = {s["name"]: s for s in servers["items"]}  # this session's servers (earlier tests' may remain)
    assert ours[server.name]["task"] == str(task.pk) and ours[server.name]["status"] == "ACTIVE"
    assert client.get("/api/v1/clouds/os-dev/resources/quotas").status_code == 403  # the tenant's: for admins
    os_live.world.alice.is_staff = True
    os_live.world.alice.save()
    quotas = {q["resource"]: q for q in client.get("/api/v1/clouds/os-dev/resources/quotas").json()["items"]}
    assert quotas["instances"]["used"] >= 1 and quotas["instances"]["limit"] >= 1
    volume = os_live.conn.block_storage.create_volume(size=1, name=f"inventory-{os_live.connection.pk}")
    try:
        volumes = client.get("/api/v1/clouds/os-dev/resources/volumes")
        assert volumes.status_code == 200, volumes.json()
        listed = {v["id"]: v for v in volumes.json()["items"]}
        assert listed[volume.id]["name"] == volume.name and listed[volume.id]["size_gb"] == 1
    finally:
        os_live.conn.block_storage.wait_for_status(volume, "available", failures=["error"], interval=1, wait=60)
        os_live.conn.block_storage.delete_volume(volume)
