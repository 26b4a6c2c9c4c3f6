"""A way in, in headless Chromium against the live Daphne: SSH keys kept on the settings page (a private key
refused next to its field and not shown again), chosen on the launch form (dev OpenStack), and the ready-to-copy
ssh command on the instance page, through the connection's jump host (dev OpenStack and kmock's KubeVirt)."""

from __future__ import annotations

import base64
import re

import pytest
import yaml
from django_q.conf import Conf
from playwright.sync_api import expect

from cloudpivot.accounts.models import SshKey
from cloudpivot.accounts.ssh_keys import ssh_key_create
from clusters.models import CloudConnection
from resources.models import Instance
from resources.services import instances_refresh
from tests.plugins.browser import screenshot
from tests.resources.kubevirt_world import create_running
from tests.resources.ssh_access import keygen

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_bob_keeps_ssh_keys_on_his_settings_page(open_page, world, tmp_path):
    line, private, fingerprint = keygen(tmp_path, "laptop")
    page = open_page("bob")
    page.goto("/settings/")
    expect(page.get_by_role("heading", name="SSH keys")).to_be_visible()
    expect(page.locator("#ssh-keys")).to_contain_text("No SSH keys yet")

    page.get_by_label("Key name").fill("oops")
    page.get_by_label("Public key").fill(private)  # the private key, pasted by mistake
    page.get_by_role("button", name="Add key").click()
    expect(page.locator("#ssh_key_public_key_errors")).to_contain_text("this is a private key: never share it")
    expect(page.get_by_label("Public key")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Public key")).to_have_value("")  # not shown again
    assert private.splitlines()[1] not in page.content()
    assert not SshKey.objects.exists()

    page.get_by_label("Key name").fill("laptop")
    page.get_by_label("Public key").fill(line)
    page.get_by_role("button", name="Add key").click()
    expect(page.locator(".message.success")).to_contain_text(f"SSH key laptop added ({fingerprint})")
    row = page.locator('[data-ssh-key-row="laptop"]')
    expect(row.locator("[data-fingerprint]")).to_have_text(fingerprint)
    expect(row).to_contain_text("ssh-ed25519")
    expect(row).to_contain_text("bob@laptop")
    screenshot(page, "settings-ssh-keys", full_page=True)

    row.get_by_role("button", name="Delete laptop").click()
    expect(page.locator(".message.success")).to_contain_text("SSH key laptop deleted")
    expect(page.locator('[data-ssh-key-row="laptop"]')).to_have_count(0)
    assert not SshKey.objects.filter(user=world.bob).exists()


def test_bob_launches_with_one_of_his_keys_and_copies_the_ssh_command(
    os_instances, open_page, operations_worker, tmp_path
):
    world = os_instances.world
    laptop, _, _ = keygen(tmp_path, "laptop")
    desk, _, _ = keygen(tmp_path, "desk")
    ssh_key_create(user=world.bob, name="laptop", public_key=laptop)
    ssh_key_create(user=world.bob, name="desk", public_key=desk)
    connection = os_instances.connection
    CloudConnection.objects.filter(pk=connection.pk).update(
        options=connection.options | {"ssh_user": "researcher", "ssh_jump_host": "bastion.example.org"}
    )
    page = open_page("bob")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto("/instances/new/")
    keys = page.locator("#field-ssh_keys")
    expect(
        keys.get_by_role("checkbox", name=re.compile(r"^laptop \(SHA256:"))
    ).to_be_checked()  # all of them, unless unticked
    expect(keys.get_by_role("checkbox", name=re.compile(r"^desk \(SHA256:"))).to_be_checked()
    keys.get_by_role("checkbox", name=re.compile(r"^desk ")).uncheck()
    page.get_by_label("Name").fill("with-a-key")
    page.get_by_label("Image").select_option(label="cp-runner-fake")
    page.get_by_role("button", name="Launch").click()
    page.wait_for_url(re.compile(r"/instances/[0-9a-f-]{36}/$"), timeout=60_000)
    expect(page.locator("#instance-status")).to_have_text("Running", timeout=90_000)
    expect(page.locator("#instance-login-user")).to_have_text("researcher")
    expect(page.locator("#instance-ssh-keys")).to_have_text("laptop")
    expect(page.locator("#instance-ssh-missing")).to_contain_text("once the cloud reports an address")

    instance = Instance.objects.get(name="with-a-key")
    user_data = base64.b64decode(os_instances.conn.compute.get_server(instance.server_id).user_data).decode()
    assert yaml.safe_load(user_data)["users"][1]["ssh_authorized_keys"] == [laptop]  # Nova's copy: the one ticked

    os_instances.conn.compute.update_server(instance.server_id, access_ipv4="192.0.2.20")  # an operator's address
    instances_refresh()
    command = page.locator("#instance-ssh-command")  # the panel polls: no reload
    expect(command).to_have_text("ssh -J bastion.example.org researcher@192.0.2.20", timeout=30_000)
    expect(page.locator("#instance-address")).to_have_text("192.0.2.20")
    expect(page.locator("#instance-ssh")).to_contain_text("through bastion.example.org")
    page.locator("#instance-ssh").get_by_role("button", name="Copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == "ssh -J bastion.example.org researcher@192.0.2.20"
    screenshot(page, "instance-ssh", full_page=True)


def test_the_ssh_command_of_a_kubevirt_vm_on_its_page(kv, world, api, open_page, monkeypatch, tmp_path):
    monkeypatch.setattr(Conf, "SYNC", False)  # the test's worker thread runs the create, not the request
    line, _, _ = keygen(tmp_path, "laptop")
    ssh_key_create(user=world.bob, name="laptop", public_key=line)
    instance_id, vm_name = create_running(api, kv)
    cloud_init = {v["name"]: v for v in kv.vm(vm_name)["spec"]["template"]["spec"]["volumes"]}["cloudinitdisk"]
    assert line in cloud_init["cloudInitNoCloud"]["userData"]
    page = open_page("bob")
    page.goto(f"/instances/{instance_id}/")
    expect(page.locator("#instance-ssh-missing")).to_contain_text("once the cloud reports an address")

    path = f"/apis/kubevirt.io/v1/namespaces/tasks/virtualmachineinstances/{vm_name}/status"
    interfaces = [{"name": "default", "ipAddress": "10.244.1.9"}]
    kv.call(lambda: kv.api.system("PATCH", path, {"status": {"interfaces": interfaces}}))  # virt-handler's part
    instances_refresh()
    expect(page.locator("#instance-ssh-command")).to_have_text("ssh cloudpivot@10.244.1.9", timeout=30_000)
    expect(page.locator("#instance-ssh-keys")).to_have_text("laptop")
