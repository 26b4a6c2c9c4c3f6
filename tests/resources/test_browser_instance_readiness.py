"""Booting is not ready, in headless Chromium (real Daphne): the instance page and the list show a KubeVirt VM
Booting with what it waits for, then Ready with what showed it, by themselves (they poll); a restart boots it
again. The loopback cluster plays KubeVirt, and virt-handler's AgentConnected condition arrives late."""

from __future__ import annotations

import pytest
from django_q.conf import Conf
from playwright.sync_api import expect

from cloudpivot.accounts.ssh_keys import ssh_key_create
from resources.services import instances_refresh
from tests.resources.kubevirt_world import Worker, accepted, act, asked, create_running, succeeded
from tests.resources.ssh_access import keygen

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_bob_sees_his_vm_booting_then_ready_with_the_reason_on_its_page_and_in_the_list(
    kv, world, api, open_page, monkeypatch, tmp_path
):
    monkeypatch.setattr(Conf, "SYNC", False)  # the test's worker threads run the operations
    line, _, _ = keygen(tmp_path, "laptop")
    ssh_key_create(user=world.bob, name="laptop", public_key=line)
    instance_id, name = create_running(api, kv)
    path = f"/apis/kubevirt.io/v1/namespaces/tasks/virtualmachineinstances/{name}/status"
    kv.call(lambda: kv.api.system("PATCH", path, {"status": {"interfaces": [{"ipAddress": "10.244.1.9"}]}}))
    instances_refresh()

    page = open_page("bob")
    page.goto(f"/instances/{instance_id}/")
    expect(page.locator("#instance-status")).to_have_text("Running")
    expect(page.locator("#instance-readiness")).to_have_text("Booting")
    expect(page.locator("#instance-readiness-reason")).to_have_text(
        "Guest booting: waiting for the guest agent (KubeVirt: the VMI's AgentConnected condition)"
    )
    expect(page.locator("#instance-ssh-command")).to_have_text("ssh cloudpivot@10.244.1.9")
    expect(page.locator("#instance-ssh")).to_have_attribute("data-ready", "false")
    expect(page.locator("#instance-ssh-state")).to_contain_text("Not ready yet: the guest is booting")

    kv.guest_agent_connected(name)  # qemu-guest-agent answers inside the guest
    instances_refresh()
    expect(page.locator("#instance-readiness")).to_have_text("Ready", timeout=30_000)  # no reload: the panel polls
    expect(page.locator("#instance-readiness-reason")).to_have_text(
        "Guest ready: the guest agent connected (KubeVirt: the VMI's AgentConnected condition)"
    )
    expect(page.locator("#instance-ssh")).to_have_attribute("data-ready", "true")
    expect(page.locator("#instance-ssh-state")).to_have_text("Ready: the guest answered.")

    page.goto("/instances/")
    row = page.locator(f'[data-instance-row="{instance_id}"]')
    expect(row.locator("[data-instance-status]")).to_have_text("Running")
    expect(row.locator("[data-instance-readiness]")).to_have_text("Ready")

    reboot = Worker(accepted(act(api, instance_id, "reboot", type="soft")))
    asked(kv, reboot)
    kv.vm_restarted(name)
    succeeded(reboot)
    expect(row.locator("[data-instance-readiness]")).to_have_text("Booting", timeout=30_000)  # the list polls
    expect(row.locator("[data-instance-readiness-reason]")).to_have_text(
        "waiting for the guest agent (KubeVirt: the VMI's AgentConnected condition)"
    )
    kv.guest_agent_connected(name)
    instances_refresh()
    expect(row.locator("[data-instance-readiness]")).to_have_text("Ready", timeout=30_000)
    expect(row.locator("[data-instance-readiness-reason]")).to_have_count(0)
