"""The host agent under faults: a real agent, real programs, a real Daphne that goes away and comes back.

Each program writes a known byte sequence, so "nothing lost, nothing twice" is checked byte for
byte; events are checked by the task's history and the attempt's acked seq.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tasks.models import LogChunk, Task
from tasks.services import reconcile_pass
from tasks.services.logs import log_read
from tasks.services.submission import task_submit
from tests import helpers
from tests.builders import hello_spec
from tests.runner_api.support import LINES, expected_lines, state_changes

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def agent_pid(runs_dir: Path) -> int:
    return int((runs_dir / "agent.lock").read_text())


def program_info(runs_dir: Path, task: Task) -> dict:
    path = runs_dir / task.attempts.get().external_name / "program.json"
    return helpers.wait_for(lambda: path.exists() and json.loads(path.read_text()), what="program.json")


def test_a_20_s_server_outage_loses_nothing_and_duplicates_nothing(server, world):
    task, _ = task_submit(
        user=world.bob, document=hello_spec(command=["python3", "-c", LINES.format(n=300, pause=0.1)])
    )
    helpers.drive(task, {"RUNNING"}, timeout=20)
    helpers.wait_for(lambda: log_read(task=task)["next_offset"] > 2000, what="some output before the outage")
    server.stop()
    outage_started = time.monotonic()
    while time.monotonic() - outage_started < 20:  # the reconciler goes on meanwhile, as a worker would
        reconcile_pass()
        time.sleep(0.5)
    server.start()
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=60)
    assert task.state == "SUCCEEDED", task.state_reason
    assert log_read(task=task, limit=10**7)["data"] == expected_lines(300)
    assert state_changes(task) == ["SUBMITTING", "STARTING", "RUNNING", "SUCCEEDED"]
    attempt = task.attempts.get()
    assert attempt.acked_seq == 2  # started, exited: each applied once


def test_an_agent_killed_mid_run_is_restarted_and_re_attaches(server, world):
    program = LINES.format(n=60, pause=0.1) + "sys.exit(7)\n"
    task, _ = task_submit(user=world.bob, document=hello_spec(command=["python3", "-c", program]))
    helpers.drive(task, {"RUNNING"}, timeout=20)
    first_agent = agent_pid(world.runs_dir)
    program_pid = program_info(world.runs_dir, task)["pid"]
    helpers.wait_for(lambda: log_read(task=task)["next_offset"] > 500, what="some output")
    os.kill(first_agent, signal.SIGKILL)
    assert helpers.pid_alive(program_pid)  # the program does not die with the agent
    task = helpers.drive(task, {"FAILED", "SUCCEEDED", "UNKNOWN"}, timeout=40)
    attempt = task.attempts.get()
    assert attempt.runner_pid not in (None, first_agent)  # a new agent finished the job
    assert task.state == "FAILED" and task.exit_code == 7, task.state_reason
    assert log_read(task=task, limit=10**7)["data"] == expected_lines(60)  # one run, every byte once
    assert state_changes(task) == ["SUBMITTING", "STARTING", "RUNNING", "FAILED"]
    assert attempt.acked_seq == 2


def test_an_agent_that_died_before_the_program_ended_reports_the_exit_it_missed(server, world):
    task, _ = task_submit(
        user=world.bob, document=hello_spec(command=["python3", "-c", "import time; time.sleep(2); print('late')"])
    )
    helpers.drive(task, {"RUNNING"}, timeout=20)
    os.kill(agent_pid(world.runs_dir), signal.SIGKILL)
    program_pid = program_info(world.runs_dir, task)["pid"]
    helpers.wait_for(lambda: not helpers.pid_alive(program_pid), what="the program to end while no agent runs")
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=30)
    assert task.state == "SUCCEEDED", task.state_reason  # the supervisor's exit.json outlived the agent
    assert log_read(task=task)["data"] == "late\n"


def test_a_silent_agent_makes_the_task_unknown_and_its_return_verifies_it(server, world, settings):
    settings.RUNNER_HEARTBEAT_DEADLINE_SECONDS = 3
    program = "import time; print('up', flush=True); time.sleep(8); print('done')"
    task, _ = task_submit(user=world.bob, document=hello_spec(command=["python3", "-c", program]))
    helpers.drive(task, {"RUNNING"}, timeout=20)
    agent = agent_pid(world.runs_dir)
    os.kill(agent, signal.SIGSTOP)  # alive (it holds its lock) but silent, like a hung process
    try:
        task = helpers.drive(task, {"UNKNOWN"}, timeout=30)
        assert "no word from the Runner" in task.state_reason and "still runs" in task.state_reason
        assert task.attempts_count == 1
    finally:
        os.kill(agent, signal.SIGCONT)
    task = helpers.drive(task, {"SUCCEEDED", "FAILED"}, timeout=30)
    assert task.state == "SUCCEEDED"
    assert state_changes(task)[-3:] == ["UNKNOWN", "RUNNING", "SUCCEEDED"]
    assert log_read(task=task)["data"] == "up\ndone\n"


def test_a_program_whose_supervisor_is_killed_is_reported_lost(server, world):
    task, _ = task_submit(user=world.bob, document=hello_spec(command=["sleep", "600"]))
    helpers.drive(task, {"RUNNING"}, timeout=20)
    program_pid = program_info(world.runs_dir, task)["pid"]
    supervisor = int(Path(f"/proc/{program_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    os.kill(supervisor, signal.SIGKILL)
    task = helpers.drive(task, {"UNKNOWN", "FAILED", "SUCCEEDED"}, timeout=30)
    assert task.state == "UNKNOWN", task.state_reason
    assert "lost" in task.state_reason and task.attempts_count == 1
    helpers.wait_for(lambda: not helpers.pid_alive(program_pid), what="the orphaned program to be killed")


def test_one_agent_runs_many_attempts_and_a_second_agent_refuses_to_start(server, world):
    tasks = [
        task_submit(user=world.bob, document=hello_spec(command=["python3", "-c", f"print({i})"]))[0] for i in range(5)
    ]
    for task in tasks:
        helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=30)
    assert [log_read(task=t)["data"] for t in tasks] == [f"{i}\n" for i in range(5)]
    assert {t.attempts.get().runner_pid for t in tasks} == {agent_pid(world.runs_dir)}
    import subprocess
    import sys

    from clusters.backends.local import AGENT_PROGRAM, agent_name

    second = subprocess.run(
        [sys.executable, str(AGENT_PROGRAM), "--server-url", server.url, "--credential-file"]
        + [str(world.runs_dir / "agent.credential"), "--state-dir", str(world.runs_dir)]
        + ["--name", agent_name(world.runs_dir)],
        capture_output=True,
        timeout=30,
    )
    assert second.returncode == 75 and b"another agent holds" in second.stderr


def test_output_that_is_not_utf8_is_kept_byte_for_byte(server, world):
    program = "import sys; sys.stdout.buffer.write(b'caf\\xe9 \\xff\\xfe\\n'); sys.stderr.buffer.write(b'\\x80!')"
    task, _ = task_submit(user=world.bob, document=hello_spec(command=["python3", "-c", program]))
    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=30)
    assert task.state == "SUCCEEDED", task.state_reason
    chunks = LogChunk.objects.filter(task=task).order_by("stream", "offset")
    by_stream = {"stdout": b"", "stderr": b""}
    for chunk in chunks:
        by_stream[chunk.stream] += bytes(chunk.data)
    assert by_stream == {"stdout": b"caf\xe9 \xff\xfe\n", "stderr": b"\x80!"}


def test_a_host_reboot_under_the_program_interrupts_the_attempt_and_the_task_runs_again(server, world, tmp_path):
    """A reboot kills everything on the host; the program's record says it started in another boot. That is the
    infrastructure's doing: the attempt ends `interrupted` and the task runs again without using up a retry."""
    marker = tmp_path / "first-run"
    program = f"import os, time; first = not os.path.exists({str(marker)!r}); open({str(marker)!r}, 'a').close()\n"
    program += "time.sleep(600 if first else 0); print('second run')"
    task, _ = task_submit(user=world.bob, document=hello_spec(command=["python3", "-c", program]))
    helpers.drive(task, {"RUNNING"}, timeout=20)
    info = program_info(world.runs_dir, task)
    helpers.wait_for(marker.exists, what="the first run")
    supervisor = int(Path(f"/proc/{info['pid']}/stat").read_text().rsplit(")", 1)[1].split()[1])
    for pid in (agent_pid(world.runs_dir), supervisor):
        os.kill(pid, signal.SIGKILL)
    os.killpg(info["pid"], signal.SIGKILL)
    helpers.wait_for(lambda: not helpers.pid_alive(info["pid"]), what="the program gone with its host")
    record = world.runs_dir / task.attempts.get().external_name / "program.json"
    record.write_text(json.dumps(info | {"boot_id": "an-earlier-boot"}))

    task = helpers.drive(task, {"SUCCEEDED", "FAILED", "UNKNOWN"}, timeout=60)
    assert task.state == "SUCCEEDED", task.state_reason
    first, second = task.attempts.order_by("number")
    assert (first.state, second.state) == ("interrupted", "finished")
    assert "the host rebooted" in first.failure_reason
    assert (task.failed_attempts, task.interruptions, task.attempts_count) == (0, 1, 2)
    assert state_changes(task) == ["SUBMITTING", "STARTING", "RUNNING", "RETRY_WAIT"] + [
        "SUBMITTING",
        "STARTING",
        "RUNNING",
        "SUCCEEDED",
    ]
    assert log_read(task=task)["data"] == "second run\n"
