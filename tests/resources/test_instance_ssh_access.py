"""A way in: an instance gets its owner's chosen SSH keys, and the API gives its address, login user and a
ready-to-copy ssh command (through the connection's jump host).

OpenStack: the development cloud; the keys are read back from Nova's own copy of the server's user data
(the admin's SDK), the address is the access address an operator sets on the server (the dev cloud's
Neutron has no agents, so servers get no ports). KubeVirt: kmock, the test playing KubeVirt: the VM body
CloudPivot sent carries the cloud-init volume with the keys, and the VMI's interface gives the address.
"""

from __future__ import annotations

import base64

import pytest
import yaml
from django_q.conf import Conf

from cloudpivot.accounts.models import SshKey
from clusters.connection_options import option_errors
from clusters.models import CloudConnection
from resources.models import Instance
from resources.services import instances_refresh
from tests.helpers import wait_for
from tests.resources.kubevirt_world import Worker, accepted, succeeded
from tests.resources.openstack_support import create
from tests.resources.ssh_access import keys_for_bob, set_options


def cloud_config(user_data: str) -> dict:
    assert user_data.startswith("#cloud-config\n"), user_data[:40]
    return yaml.safe_load(user_data)


def login_entry(document: dict) -> dict:
    users = document["users"]
    assert users[0] == "default"  # the image's own user stays
    return users[1]


# ---------------------------------------------------------------------------- OpenStack
@pytest.mark.e2e
def test_an_openstack_server_gets_the_chosen_keys_and_the_api_gives_the_ssh_command(os_instances, api, tmp_path):
    keys = keys_for_bob(os_instances.world, tmp_path)
    set_options(os_instances.connection, ssh_user="researcher", ssh_jump_host="bastion.example.org")

    refused = create(api, ssh_keys=["laptop", "nope"])
    assert refused.status_code == 400
    assert refused.json()["errors"] == [
        {"field": "ssh_keys", "message": "unknown SSH key nope: your keys are desk, laptop"}
    ]
    assert not Instance.objects.exists()

    response = create(api, ssh_keys=["laptop"])
    assert response.status_code == 202, response.json()
    operation = api("bob").get(f"/api/v1/operations/{response.json()['id']}").json()
    assert operation["state"] == "succeeded", operation
    assert operation["params"]["ssh_keys"] == ["laptop"]
    vm = api("rita").get(f"/api/v1/instances/{operation['instance']}").json()
    fingerprint = SshKey.objects.get(user=os_instances.world.bob, name="laptop").fingerprint
    assert vm["ssh_keys"] == [{"name": "laptop", "fingerprint": fingerprint}]
    assert vm["login_user"] == "researcher"
    assert vm["address"] == "" and vm["ssh_command"] == ""  # no address yet: no command to copy

    # Nova's copy of the user data (admin-only field): the login user with exactly the chosen key
    server = os_instances.conn.compute.get_server(vm["server_id"])
    assert server.user_data, "Nova holds no user data for the server"
    entry = login_entry(cloud_config(base64.b64decode(server.user_data).decode()))
    assert entry["name"] == "researcher" and entry["ssh_authorized_keys"] == [keys["laptop"]]
    assert entry["lock_passwd"] is True and entry["sudo"] == "ALL=(ALL) NOPASSWD:ALL"

    # an operator gives the server its access address; the refresh reads it from Nova
    os_instances.conn.compute.update_server(vm["server_id"], access_ipv4="192.0.2.10")
    instances_refresh()
    vm = api("rita").get(f"/api/v1/instances/{vm['id']}").json()
    assert vm["address"] == "192.0.2.10"
    assert vm["ssh_command"] == "ssh -J bastion.example.org researcher@192.0.2.10"

    # without a jump host, the plain command
    set_options(os_instances.connection, ssh_jump_host="")
    vm = api("rita").get(f"/api/v1/instances/{vm['id']}").json()
    assert vm["ssh_command"] == "ssh researcher@192.0.2.10"


@pytest.mark.e2e
def test_without_a_list_an_openstack_server_gets_all_the_owners_keys_and_with_none_no_user_data(
    os_instances, api, tmp_path
):
    keys = keys_for_bob(os_instances.world, tmp_path)
    every = create(api, name="all-keys")
    assert every.status_code == 202, every.json()
    instance = Instance.objects.get(name="all-keys")
    assert instance.login_user == "cloudpivot"  # no ssh_user option: the default
    server = os_instances.conn.compute.get_server(instance.server_id)
    entry = login_entry(cloud_config(base64.b64decode(server.user_data).decode()))
    assert sorted(entry["ssh_authorized_keys"]) == sorted(keys.values())

    none = create(api, name="no-keys", ssh_keys=[])
    assert none.status_code == 202, none.json()
    instance = Instance.objects.get(name="no-keys")
    assert instance.ssh_keys == [] and not os_instances.conn.compute.get_server(instance.server_id).user_data
    api_view = api("bob").get(f"/api/v1/instances/{instance.pk}").json()
    assert api_view["ssh_command"] == "" and api_view["ssh_keys"] == []


def test_connection_options_for_ssh_are_checked():
    assert option_errors("openstack", {"ssh_user": "researcher", "ssh_jump_host": "ops@bastion.example.org:2222"}) == []
    assert option_errors("kubernetes", {"ssh_jump_host": "[2001:db8::1]:22"}) == []
    assert [key for key, _ in option_errors("openstack", {"ssh_user": "Root Admin"})] == ["ssh_user"]
    # a value starting with '-' would be an ssh option in the copied command
    assert [key for key, _ in option_errors("kubernetes", {"ssh_jump_host": "-oProxyCommand=x"})] == ["ssh_jump_host"]


# ---------------------------------------------------------------------------- KubeVirt (kmock)
def test_a_kubevirt_vm_carries_the_keys_in_its_cloud_init_volume_and_the_vmi_gives_the_address(
    kv, world, api, tmp_path, monkeypatch
):
    monkeypatch.setattr(Conf, "SYNC", False)  # the test's worker thread runs the create, not the request
    keys = keys_for_bob(world, tmp_path)
    connection = CloudConnection.objects.get(cloud_id="kv-ephemeral")
    set_options(connection, ssh_jump_host="ops@gate.example.org")

    document = {"name": "vm1", "cloud": "kv-ephemeral", "flavor": "small", "image": "quay.io/containerdisks/fedora:40"}
    refused = api("bob").post("/api/v1/instances", document | {"ssh_keys": ["work"]}, format="json")
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "ssh_keys"

    response = api("bob").post("/api/v1/instances", document | {"ssh_keys": ["desk"]}, format="json")
    worker = Worker(accepted(response))
    instance_id = response.json()["instance"]
    vm_name = wait_for(lambda: Instance.objects.get(pk=instance_id).server_id, what="the VM to be created")
    # the body CloudPivot sent: a cloud-init NoCloud disk with the chosen key only
    spec = kv.vm(vm_name)["spec"]["template"]["spec"]
    disks = {d["name"] for d in spec["domain"]["devices"]["disks"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert disks == {"rootdisk", "cloudinitdisk"} and set(volumes) == {"rootdisk", "cloudinitdisk"}
    entry = login_entry(cloud_config(volumes["cloudinitdisk"]["cloudInitNoCloud"]["userData"]))
    assert entry["name"] == "cloudpivot" and entry["ssh_authorized_keys"] == [keys["desk"]]

    kv.vm_status(vm_name, "Starting")
    kv.vm_running(vm_name)
    succeeded(worker)
    assert api("bob").get(f"/api/v1/instances/{instance_id}").json()["ssh_command"] == ""  # no interface yet

    # virt-handler reports the VMI's interface; the refresh reads it
    path = f"/apis/kubevirt.io/v1/namespaces/tasks/virtualmachineinstances/{vm_name}/status"
    interfaces = [{"name": "default", "ipAddress": "10.244.1.7", "ipAddresses": ["10.244.1.7", "fd10:244::7"]}]
    kv.call(lambda: kv.api.system("PATCH", path, {"status": {"interfaces": interfaces}}))
    instances_refresh()
    vm = api("bob").get(f"/api/v1/instances/{instance_id}").json()
    assert vm["address"] == "10.244.1.7"
    assert vm["ssh_command"] == "ssh -J ops@gate.example.org cloudpivot@10.244.1.7"


def test_a_kubevirt_vm_given_no_keys_has_no_cloud_init_volume(kv, api, monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", False)
    document = {"name": "vm2", "cloud": "kv-ephemeral", "flavor": "small", "image": "quay.io/containerdisks/fedora:40"}
    response = api("bob").post("/api/v1/instances", document, format="json")  # bob has no keys at all
    worker = Worker(accepted(response))
    vm_name = wait_for(
        lambda: Instance.objects.get(pk=response.json()["instance"]).server_id, what="the VM to be created"
    )
    volumes = [v["name"] for v in kv.vm(vm_name)["spec"]["template"]["spec"]["volumes"]]
    assert volumes == ["rootdisk"]
    kv.vm_status(vm_name, "Starting")
    kv.vm_running(vm_name)
    succeeded(worker)
