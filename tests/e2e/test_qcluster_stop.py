"""`manage.py qcluster` stops within its grace on SIGTERM, jobs in hand or not (cloudpivot/workers/stop.py).

A real qcluster with two workers: one holds a job that sleeps for minutes, the other the ticker (set to run
for two minutes). SIGTERM reaches either its whole process group (a test's or a container runtime's killpg:
the sentinel and the workers die at once, which could leave django-q2's own stop waiting for ever) or the
qcluster alone (systemd's KillMode=process, `manage.py serve`: the sentinel waits for the jobs in hand).
Either way the qcluster exits within CLOUDPIVOT_WORKER_STOP_SECONDS and a margin, and leaves no process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

GRACE = 3.0
MARGIN = 12.0  # the SIGKILLs, the reaping and the exit (Python's own teardown: 2-4 s) on a loaded two-core machine


@pytest.mark.parametrize("signalled", ["group", "qcluster alone"])
def test_a_qcluster_with_jobs_in_hand_exits_within_its_grace_on_sigterm(signalled, tmp_path):
    env = helpers.server_environment(port=helpers.free_port(), runs_dir=tmp_path / "runs") | {
        "CLOUDPIVOT_QUEUE_NAME": f"stop-test-{os.getpid()}-{signalled.split()[0]}",
        "CLOUDPIVOT_WORKERS": "2",
        "CLOUDPIVOT_TICKER_SECONDS": "120",
        "CLOUDPIVOT_WORKER_STOP_SECONDS": str(GRACE),
    }
    held = tmp_path / "held"
    qcluster = helpers.start_qcluster(env=env, log=tmp_path / "qcluster.log")
    try:
        enqueue = f"from django_q.tasks import async_task; async_task('tests.e2e.held_job.hold', {str(held)!r}, 600)"
        helpers.manage("shell", "-c", enqueue, env=env)
        helpers.wait_for(held.exists, timeout=60, what="the held job to be in a worker's hand")
        tree = helpers.descendants([qcluster.pid])
        assert int(held.read_text()) in tree
        began = time.monotonic()
        if signalled == "group":
            os.killpg(qcluster.pid, signal.SIGTERM)
        else:
            qcluster.send_signal(signal.SIGTERM)
        try:
            qcluster.wait(timeout=GRACE + MARGIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"qcluster still running {GRACE + MARGIN:.0f} s after SIGTERM ({signalled})")
        took = time.monotonic() - began
    finally:
        helpers.stop_process_group(qcluster, sig=signal.SIGKILL)
    left = sorted(pid for pid in tree if helpers.pid_alive(pid))
    assert not left, f"processes of the qcluster left running: {left}"
    print(f"qcluster exited {took:.1f} s after SIGTERM ({signalled}), code {qcluster.returncode}")
