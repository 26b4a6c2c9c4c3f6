"""A task on a real guest (issue 31 item 4, first point): QEMU boots the Debian image with the OpenStack
backend's user data for the attempt on a config drive; cloud-init writes the host program, its config, the CA
and the bootstrap secret, systemd starts it, and it reaches the test's server over TLS through QEMU's user
network. The program also writes the host program's RSS to the kernel log (so to the serial console), leaving
the task's log as it is; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import datetime as dt
import re

import pytest

from tasks.services.logs import log_read
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec
from tests.guest_backend import GUESTS

pytestmark = [pytest.mark.guest, pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(1800)]

MEASURE = """
import os
rss = []
for pid in filter(str.isdigit, os.listdir('/proc')):
    if int(pid) == os.getpid():
        continue
    try:
        cmdline = open('/proc/%s/cmdline' % pid, 'rb').read()
        status = dict(line.split(':', 1) for line in open('/proc/%s/status' % pid).read().splitlines())
    except (OSError, ValueError):
        continue
    if b'cloudpivot-agent.pyz' in cmdline:
        try:
            rollup = open('/proc/%s/smaps_rollup' % pid).read().split()
            pss = rollup[rollup.index('Pss:') + 1]
        except (OSError, ValueError):
            pss = '?'
        rss.append('pid%s/ppid%s:%s/%s' % (pid, status['PPid'].strip(), status.get('VmRSS', '0 kB').split()[0], pss))
with open('/dev/kmsg', 'w') as kmsg:
    kmsg.write('cloudpivot-measure agent_rss_pss_kb=%s\\n' % ','.join(rss))
print('hello from a real guest')
"""


def test_a_task_runs_in_a_real_guest_with_its_log_byte_exact(guest_cloud):
    world = guest_cloud.world
    task = task_submit(user=world.bob, document=hello_spec(cloud="guest", command=["python3", "-c", MEASURE]))[0]
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN", "CANCELLED"}, timeout=900, interval=1)
    attempt = task.attempts.get()
    guest = GUESTS[attempt.external_name]
    console = guest.console_text()
    assert task.state == "SUCCEEDED", f"{task.state}: {task.state_reason}\nconsole:\n{guest.console_tail()}"
    assert task.exit_code == 0
    assert log_read(task=task, limit=10**6)["data"] == "hello from a real guest\n"
    # The phases are real: QEMU started, the kernel ran (booted_at), and only after cloud-init and systemd
    # had run did the host program call (runner_contact_at). program_started_at is the guest's clock (its RTC
    # has a 1 s resolution), so it is only checked to lie within the attempt, give or take 2 s.
    assert attempt.cloud_created_at <= attempt.booted_at < attempt.runner_contact_at <= attempt.finished_at
    boot_to_contact = (attempt.runner_contact_at - attempt.booted_at).total_seconds()
    assert 1 < boot_to_contact < 900, boot_to_contact
    slack = dt.timedelta(seconds=2)
    assert attempt.booted_at - slack <= attempt.program_started_at <= attempt.finished_at + slack
    # cloud-init took the config drive (Nova's layout) and ran the user data's commands.
    assert "Datasource DataSourceConfigDrive" in console, guest.console_tail()
    rss = re.search(r"cloudpivot-measure agent_rss_pss_kb=(\S+)", console)
    assert rss, f"no measurement on the console:\n{guest.console_tail()}"
    final = re.search(r"Cloud-init v\. \S+ finished at .* Up ([\d.]+) seconds", console)
    host = guest_cloud.host
    print(
        f"\nguest: accel {host.accel} ({host.accel_reason}); cloud-init done {final.group(1) if final else '?'} s"
        f" after its kernel started; boot to 1st contact {boot_to_contact:.1f} s; agent kB RSS/PSS {rss.group(1)}"
    )
