"""Running is not ready: an instance is booting until its guest answers, and each boot starts over.

KubeVirt: kmock, the test playing virt-handler, whose VMI condition AgentConnected appears some time after the
VMI runs (qemu-guest-agent starts late in the guest's boot). OpenStack: the development cloud (Nova fake
driver, whose console only says `FAKE CONSOLE OUTPUT`, so no cloud-init marker ever appears there): the
server's access address is loopback and the test starts what answers on it, nothing, something that is not
SSH, then an SSH server's banner. The console marker's rules are checked on real cloud-init lines.
"""

from __future__ import annotations

import socket
import threading

import pytest

from cloudpivot.accounts.models import AuditEntry
from clusters.connection_options import option_errors
from clusters.models import CloudConnection
from resources.access import ssh_command
from resources.backends import get_instance_backend
from resources.backends.base import ServerView
from resources.backends.guest_probe import BASELINE_UNREAD, last_boot_marker, ssh_banner
from resources.backends.openstack import OpenStackInstances
from resources.models import Instance
from resources.services import instances_refresh
from resources.services.readiness import readiness_observe, readiness_reset
from tests.helpers import wait_for
from tests.resources.kubevirt_world import Worker, accepted, act, asked, create_running, succeeded
from tests.resources.ssh_access import keys_for_bob, set_options

# cloud-init 23.4 on Ubuntu 22.04, as its serial console shows it (one boot each)
FIRST_BOOT = (
    "[  OK  ] Finished cloud-final.service - Execute cloud user/final scripts.\n"
    "[   12.951721] cloud-init[812]: Cloud-init v. 23.4.4-0ubuntu0~22.04.1 finished at Thu, 03 Dec 2026 "
    "12:01:07 +0000. Datasource DataSourceOpenStackLocal [net,ver=2].  Up 12.93 seconds\n"
    "\nUbuntu 22.04.4 LTS vm1 ttyS0\n\nvm1 login: "
)
SECOND_BOOT = (
    "[   10.118304] cloud-init[790]: Cloud-init v. 23.4.4-0ubuntu0~22.04.1 finished at Thu, 03 Dec 2026 "
    "12:09:41 +0000. Datasource DataSourceOpenStackLocal [net,ver=2].  Up 10.09 seconds\n"
)


def shown(api, instance_id: str, user: str = "bob") -> dict:
    return api(user).get(f"/api/v1/instances/{instance_id}").json()


# ---------------------------------------------------------------------------- KubeVirt (kmock)
def test_a_kubevirt_vm_is_booting_until_the_guest_agent_connects_and_each_restart_boots_it_again(kv, api):
    instance_id, name = create_running(api, kv)
    vm = shown(api, instance_id)
    assert (vm["status"], vm["readiness"], vm["ready"]) == ("Running", "booting", False)
    assert vm["readiness_reason"] == "waiting for the guest agent (KubeVirt: the VMI's AgentConnected condition)"
    instances_refresh()
    assert shown(api, instance_id)["readiness"] == "booting"  # the VMI runs, its guest has not answered

    kv.guest_agent_connected(name)
    instances_refresh()
    vm = shown(api, instance_id)
    assert (vm["status"], vm["readiness"], vm["ready"]) == ("Running", "ready", True)
    assert vm["readiness_reason"] == "the guest agent connected (KubeVirt: the VMI's AgentConnected condition)"

    old_vmi = kv.vmi(name)["metadata"]["uid"]
    reboot = Worker(accepted(act(api, instance_id, "reboot", type="soft")))
    asked(kv, reboot)
    assert Instance.objects.get(pk=instance_id).ready is False  # reset before the restart was asked
    assert Instance.objects.get(pk=instance_id).boot_baseline == old_vmi
    kv.vm_restarted(name)  # a new VMI: its agent has not connected yet
    succeeded(reboot)
    vm = shown(api, instance_id)
    assert (vm["status"], vm["readiness"]) == ("Running", "booting"), vm
    assert vm["readiness_reason"].startswith("waiting for the guest agent")
    kv.guest_agent_connected(name)
    instances_refresh()
    assert shown(api, instance_id)["readiness"] == "ready"

    stop = Worker(accepted(act(api, instance_id, "stop")))
    wait_for(lambda: kv.vm(name)["spec"]["runStrategy"] == "Halted", what="runStrategy Halted")
    kv.vm_stopped(name)
    succeeded(stop)
    vm = shown(api, instance_id)
    assert (vm["status"], vm["readiness"], vm["ready"], vm["readiness_reason"]) == ("Stopped", None, False, "")


def readiness_feed(api, instance_id: str, user: str = "bob") -> list[dict]:
    page = api(user).get(f"/api/v1/events?after=0&limit=1000&type=instance.readiness&instance={instance_id}").json()
    return page["events"]


def test_each_change_of_readiness_is_in_the_event_feed_and_the_audit_trail_once(kv, api):
    """Booting → ready → booting again (a reboot) → ready: one feed entry and one audit entry per change,
    none for the looks that changed nothing (each refresh of a booting guest, of a ready one)."""
    instance_id, name = create_running(api, kv)
    instances_refresh()
    assert readiness_feed(api, instance_id) == []  # created booting and still booting: no change

    kv.guest_agent_connected(name)
    instances_refresh()
    instances_refresh()  # looked at again, ready still: nothing more
    reboot = Worker(accepted(act(api, instance_id, "reboot", type="soft")))
    asked(kv, reboot)
    kv.vm_restarted(name)
    succeeded(reboot)
    instances_refresh()  # the new boot's agent has not connected: booting, no change
    kv.guest_agent_connected(name)
    instances_refresh()

    feed = readiness_feed(api, instance_id)
    assert [(e["data"]["was"], e["data"]["now"], e["data"]["ready"]) for e in feed] == [
        ("not ready", "ready", True),
        ("ready", "not ready", False),
        ("not ready", "ready", True),
    ]
    agent = "the guest agent connected (KubeVirt: the VMI's AgentConnected condition)"
    assert [e["message"] for e in feed] == [
        f"ready: {agent}",
        "not ready: booting: the guest is looked at once the server runs",
        f"ready: {agent}",
    ]
    assert {(e["type"], e["project"], e["instance"], e["operation"]) for e in feed} == {
        ("instance.readiness", "alpha", instance_id, None)
    }
    assert readiness_feed(api, instance_id, user="charlie") == []  # another project's instance
    audited = AuditEntry.objects.filter(action="resources:instance-readiness", object_ref=instance_id).order_by("id")
    assert [(a.via, a.details["was"], a.details["now"], a.details["reason"]) for a in audited] == [
        ("system", e["data"]["was"], e["data"]["now"], e["data"]["reason"]) for e in feed
    ]


def test_an_agent_of_the_boot_before_does_not_make_the_new_boot_ready(kv, api):
    """The VMI's uid tells boots apart: an AgentConnected on the VMI that was there before the restart was
    asked (KubeVirt has not replaced it yet) is the old guest's."""
    instance_id, name = create_running(api, kv)
    kv.guest_agent_connected(name)
    instance = Instance.objects.get(pk=instance_id)
    backend = get_instance_backend(instance.connection)
    readiness_reset(instance, backend)  # what a restart does first
    view = backend.server(name)
    assert view.evidence["agent_connected"] is True
    readiness_observe(instance, view, backend)
    assert Instance.objects.get(pk=instance_id).ready is False
    kv.call(lambda: kv.api.system("DELETE", f"/apis/kubevirt.io/v1/namespaces/tasks/virtualmachineinstances/{name}"))
    kv.vm_running(name)
    kv.guest_agent_connected(name)
    readiness_observe(instance, backend.server(name), backend)
    assert Instance.objects.get(pk=instance_id).ready is True


# ---------------------------------------------------------------------------- OpenStack (dev cloud)
class Guest:
    """What answers at the guest's address: a loopback port, bound (connections refused) until `listen()`,
    then each connection gets `greeting` and is closed."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.greeting = b""
        self.connections = 0

    def listen(self, greeting: bytes) -> None:
        self.greeting = greeting
        self.sock.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.connections += 1
                if self.greeting:
                    conn.sendall(self.greeting)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def guest():
    answering = Guest()
    yield answering
    answering.close()


@pytest.mark.e2e
def test_an_openstack_server_is_ready_when_an_ssh_server_answers_at_its_address(os_instances, api, guest, tmp_path):
    keys_for_bob(os_instances.world, tmp_path)
    set_options(os_instances.connection, ssh_port=guest.port)
    response = api("bob").post(
        "/api/v1/instances",
        {"name": "vm1", "cloud": "os-dev", "project": "alpha", "flavor": "cp.tiny", "image": "cp-runner-fake"},
        format="json",
    )
    assert response.status_code == 202, response.json()
    instance_id = response.json()["instance"]
    vm = shown(api, instance_id)
    assert (vm["status"], vm["readiness"], vm["ready"], vm["ssh_ready"]) == ("Running", "booting", False, False)
    # the fake driver's console has no cloud-init marker, and the server no address yet
    assert vm["readiness_reason"] == (
        "waiting for cloud-init's marker in the console log (no address to look for an SSH banner at yet)"
    )

    os_instances.conn.compute.update_server(vm["server_id"], access_ipv4="127.0.0.1")  # an operator's address
    instances_refresh()  # nothing listens there yet: refused
    vm = shown(api, instance_id)
    where = f"127.0.0.1:{guest.port}"
    assert vm["readiness_reason"] == f"waiting for cloud-init's marker in the console log or an SSH banner at {where}"
    assert vm["ssh_command"] == f"ssh -p {guest.port} cloudpivot@127.0.0.1" and vm["ssh_ready"] is False

    guest.listen(b"HTTP/1.1 400 Bad Request\r\n\r\n")  # something answers, but it is no SSH server
    instances_refresh()
    assert guest.connections == 1
    assert shown(api, instance_id)["readiness"] == "booting"

    guest.greeting = b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n"  # sshd is up
    instances_refresh()
    vm = shown(api, instance_id)
    assert (vm["status"], vm["readiness"], vm["ready"], vm["ssh_ready"]) == ("Running", "ready", True, True)
    assert vm["readiness_reason"] == f"an SSH server answered at {where} (SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5)"

    guest.greeting = b""  # the rebooted guest's sshd is not up yet: it accepts, says nothing
    reboot = act(api, instance_id, "reboot", type="soft")  # jobs run inline: the reboot has ended here
    assert reboot.status_code == 202, reboot.json()
    assert api("bob").get(f"/api/v1/operations/{reboot.json()['id']}").json()["state"] == "succeeded"
    vm = shown(api, instance_id)
    assert (vm["status"], vm["readiness"], vm["ssh_ready"]) == ("Running", "booting", False), vm
    guest.greeting = b"SSH-2.0-OpenSSH_9.6p1\r\n"
    instances_refresh()
    assert shown(api, instance_id)["readiness"] == "ready"

    # the control plane does not reach the guest: no probe
    set_options(os_instances.connection, ssh_port=guest.port, ssh_jump_host="bastion.example.org")
    before = guest.connections
    assert act(api, instance_id, "stop").status_code == 202
    assert shown(api, instance_id)["readiness"] is None
    assert act(api, instance_id, "start").status_code == 202
    vm = shown(api, instance_id)
    assert (vm["status"], vm["readiness"]) == ("Running", "booting")
    assert vm["readiness_reason"] == (
        "waiting for cloud-init's marker in the console log (no SSH probe: the guest is reached through "
        "bastion.example.org)"
    )
    assert guest.connections == before


# ---------------------------------------------------------------------------- the looks themselves
def test_cloud_init_markers_tell_boots_apart():
    assert last_boot_marker("FAKE CONSOLE OUTPUT\nANOTHER\nLAST LINE") == ""
    first = last_boot_marker(FIRST_BOOT)
    assert first.startswith("Cloud-init v. 23.4.4-0ubuntu0~22.04.1 finished at Thu, 03 Dec 2026 12:01:07")
    assert first.endswith("Up 12.93 seconds")
    both = last_boot_marker(FIRST_BOOT + SECOND_BOOT)
    assert both != first and "12:09:41" in both


class ConsoleOf(OpenStackInstances):
    """The OpenStack backend reading a given console text instead of Nova's (the fake driver has none)."""

    def __init__(self, connection, text: str) -> None:
        super().__init__(connection)
        self.text = text

    def console_log(self, server_id: str, *, lines: int) -> str:
        return self.text


def test_an_openstack_console_marker_counts_only_if_this_boot_wrote_it():
    connection = CloudConnection(cloud_id="os-x", backend="openstack", options={"cloud": "x"})
    view = ServerView(id="s1", status="Running", settled=True, raw_status="ACTIVE")
    before = ConsoleOf(connection, FIRST_BOOT).boot_baseline("s1")
    assert before == last_boot_marker(FIRST_BOOT)
    waiting = ConsoleOf(connection, FIRST_BOOT).readiness(view, baseline=before)  # still the old boot's line
    assert not waiting.ready and waiting.reason.startswith("waiting for cloud-init's marker in the console log")
    seen = ConsoleOf(connection, FIRST_BOOT + SECOND_BOOT).readiness(view, baseline=before)
    assert seen.ready and seen.reason == f"cloud-init's marker in the console log: {last_boot_marker(SECOND_BOOT)}"
    assert ConsoleOf(connection, FIRST_BOOT).readiness(view, baseline="").ready  # no earlier marker: any counts
    unread = ConsoleOf(connection, FIRST_BOOT + SECOND_BOOT).readiness(view, baseline=BASELINE_UNREAD)
    assert not unread.ready and "could not be read before this boot" in unread.reason


def test_an_ssh_banner_is_read_after_other_lines_and_nothing_else_passes_for_one(guest):
    assert ssh_banner("127.0.0.1", guest.port, timeout=0.5) == ""  # refused
    guest.listen(b"")  # accepts and closes
    assert ssh_banner("127.0.0.1", guest.port, timeout=0.5) == ""
    guest.greeting = b"SSH-2.0-partial"  # no end of line: not a complete identification
    assert ssh_banner("127.0.0.1", guest.port, timeout=0.5) == ""
    guest.greeting = b"Welcome\r\nSSH-2.0-dropbear_2022.83\r\n"  # RFC 4253 4.2: other lines may come first
    assert ssh_banner("127.0.0.1", guest.port, timeout=0.5) == "SSH-2.0-dropbear_2022.83"


def test_the_ssh_port_option_is_checked_and_goes_into_the_command():
    assert option_errors("openstack", {"ssh_port": 2222}) == [] == option_errors("kubernetes", {"ssh_port": 22})
    for bad in (0, 65536, "22", True, -1):
        assert [key for key, _ in option_errors("openstack", {"ssh_port": bad})] == ["ssh_port"], bad
    assert ssh_command(user="u", address="10.0.0.5", port=2222) == "ssh -p 2222 u@10.0.0.5"
    assert ssh_command(user="u", address="10.0.0.5", jump="gw", port=22) == "ssh -J gw u@10.0.0.5"
