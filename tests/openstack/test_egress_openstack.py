"""Egress of a task VM on the development OpenStack (docs/security.md#egress): a security group per attempt, made
before the server and given to it alone, Neutron's allow-all egress removed, only the host program's path to
CloudPivot (the callback URL), the metadata service and the task's allowed destinations open; deleted with the
server at cleanup. With `none` the program also runs in a network namespace of its own in the VM (played here by
the host program on this host): a port the test opens on 127.0.0.1 is out of its reach."""

from __future__ import annotations

import socket
import urllib.parse

import openstack.compute.v2._proxy
import pytest

from tasks.models import Attempt, Task
from tasks.services import reconcile_pass
from tasks.services.logs import log_read
from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def with_policy(os_live, policy: dict) -> None:
    connection = os_live.connection
    connection.options = connection.options | {"egress": policy}
    connection.save()


def run_in_vm(os_live, api, vms, **spec) -> tuple[Task, str, list[dict], str]:
    document = {"cloud": "os-dev", **spec}
    response = api("bob").post("/api/v1/tasks", document, format="json")
    assert response.status_code == 201, response.json()
    task = helpers.drive(Task.objects.get(pk=response.json()["id"]), {"STARTING"}, timeout=60)
    attempt = task.attempts.get()
    server_id = attempt.external_ref

    def active():
        server = os_live.conn.compute.get_server(server_id)
        return server.status == "ACTIVE" and not server.task_state

    helpers.wait_for(active, timeout=60, interval=0.3, what="the server ACTIVE")
    groups = [g for g in os_live.conn.network.security_groups(name=attempt.external_name)]
    assert len(groups) == 1, groups
    rules = [
        {key: rule[key] for key in ("direction", "ethertype", "remote_ip_prefix", "protocol", "port_range_min")}
        for rule in groups[0].security_group_rules
    ]
    vms(os_live.conn, server_id)
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "TIMED_OUT", "UNKNOWN"}, timeout=60)
    return task, attempt.external_name, rules, groups[0].id


def cleaned(os_live, task: Task, name: str) -> None:
    attempt = task.attempts.get()
    helpers.wait_for(
        lambda: reconcile_pass() is not None and Attempt.objects.get(pk=attempt.pk).cleanup_state == "done",
        timeout=60,
        what="cleanup",
    )
    assert list(os_live.conn.network.security_groups(name=name)) == []


def callback_rule(os_live) -> dict:
    port = urllib.parse.urlsplit(os_live.daphne.url).port
    return {
        "direction": "egress",
        "ethertype": "IPv4",
        "remote_ip_prefix": "127.0.0.1/32",
        "protocol": "tcp",
        "port_range_min": port,
    }


METADATA = {
    "direction": "egress",
    "ethertype": "IPv4",
    "remote_ip_prefix": "169.254.169.254/32",
    "protocol": "tcp",
    "port_range_min": 80,
}


def test_a_list_of_destinations_is_a_security_group_of_the_attempt(os_live, api, vms, monkeypatch):
    # The development cloud has no network to plug the server into (its ports would show the groups): what
    # CloudPivot asks Nova for is recorded on the way instead.
    asked: list[dict] = []
    create_server = openstack.compute.v2._proxy.Proxy.create_server

    def recording(proxy, **attrs):
        asked.append(attrs)
        return create_server(proxy, **attrs)

    monkeypatch.setattr(openstack.compute.v2._proxy.Proxy, "create_server", recording)
    os_live.connection.options["security_groups"] = ["default"]  # replaced by the attempt's: groups add up
    with_policy(os_live, {"default": "none", "allow": ["10.0.0.0/8", "192.0.2.0/24"]})
    task, name, rules, group_id = run_in_vm(
        os_live, api, vms, command=["true"], network=["10.20.0.0/16:5432", "192.0.2.0/24"]
    )
    assert [a["security_groups"] for a in asked] == [[{"name": group_id}]]
    assert task.state == "SUCCEEDED", task.state_reason
    assert task.normalized["egress"] == ["10.20.0.0/16:5432", "192.0.2.0/24"]

    def dst(prefix, protocol=None, port=None):
        return {
            "direction": "egress",
            "ethertype": "IPv4",
            "remote_ip_prefix": prefix,
            "protocol": protocol,
            "port_range_min": port,
        }

    expected = [
        callback_rule(os_live),
        METADATA,
        dst("10.20.0.0/16", "tcp", 5432),
        dst("10.20.0.0/16", "udp", 5432),
        dst("192.0.2.0/24"),
    ]
    key = lambda rule: sorted((k, str(v)) for k, v in rule.items())  # noqa: E731
    assert sorted(rules, key=key) == sorted(expected, key=key)  # Neutron's allow-all egress is gone; nothing in
    cleaned(os_live, task, name)


def test_none_leaves_only_the_path_to_cloudpivot_and_the_program_without_network(os_live, api, vms):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        program = (
            "import socket, sys\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
            "except OSError as exc:\n"
            "    print('refused:', type(exc).__name__); sys.exit(3)\n"
            "print('connected')\n"
        )
        task, name, rules, _ = run_in_vm(os_live, api, vms, command=["python3", "-c", program], network="none")
    assert task.normalized["egress"] == "none"
    assert sorted(rules, key=str) == sorted([callback_rule(os_live), METADATA], key=str)
    assert task.state == "FAILED" and task.exit_code == 3, task.state_reason
    assert log_read(task=task)["data"] == "refused: ConnectionRefusedError\n"
    cleaned(os_live, task, name)


def test_open_makes_no_security_group(os_live, api):
    response = api("bob").post("/api/v1/tasks", {"cloud": "os-dev", "command": ["true"]}, format="json")
    assert response.status_code == 201, response.json()
    task = helpers.drive(Task.objects.get(pk=response.json()["id"]), {"STARTING"}, timeout=60)
    assert task.normalized["egress"] == "open"
    assert list(os_live.conn.network.security_groups(name=task.attempts.get().external_name)) == []
