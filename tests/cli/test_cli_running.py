"""Tasks that really run (a real qcluster and local Runners) followed with the installed `cloudpivot`:
--wait's exit statuses, live logs that survive a server restart, events, describe, retry, and a
submit that the CLI itself retries while the server is down."""

from __future__ import annotations

import json
import time

import pytest

from tasks.models import Task
from tests import helpers
from tests.cli.support import Lines, spec_file

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

COUNT_SLOWLY = (
    "import sys, time\nfor i in range({n}):\n    print('line %03d' % i, flush=True)\n    time.sleep({pause})\n"
)


def program(code: str, **extra) -> dict:
    return {"cloud": "local", "command": ["python3", "-c", code], **extra}


def test_wait_exits_with_the_programs_own_code_and_follow_prints_its_output(logged_in, worker, tmp_path):
    spec = spec_file(
        tmp_path, "spec.yaml", "cloud: local\nname: three\ncommand: [sh, -c, 'echo out; echo err >&2; exit 3']\n"
    )
    done = logged_in("task", "submit", "-f", str(spec), "--wait", "--follow", timeout=180)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == ["out", "err"] or sorted(done.stdout.splitlines()) == ["err", "out"]
    assert "FAILED (exit status 3)" in done.stderr
    ok = logged_in("task", "submit", "-f", "-", "--wait", input=json.dumps(program("print('fine')")), timeout=180)
    assert ok.returncode == 0, ok.stderr
    task_id = done.stderr.split()[1]
    stderr_only = logged_in("task", "logs", task_id, "--stream", "stderr")
    assert stderr_only.stdout == "err\n"
    described = logged_in("task", "describe", task_id).stdout
    assert "State:" in described and "FAILED" in described and "Attempts:" in described
    assert "PROGRAM_STARTED" in described and "Last events:" in described
    events = logged_in("task", "events", task_id).stdout.splitlines()
    assert len(events) == Task.objects.get(pk=task_id).last_event_seq
    retried = logged_in("task", "retry", task_id)
    assert retried.returncode == 0 and retried.stdout.split()[2] not in ("FAILED", "SUCCEEDED")
    again = logged_in("task", "logs", "-f", task_id, timeout=180)  # follows the new attempt to the end
    assert again.returncode == 0 and sorted(again.stdout.splitlines()) == ["err", "out"]
    assert Task.objects.get(pk=task_id).attempts_count == 2
    assert logged_in("task", "cancel", task_id).returncode == 87  # finished: a conflict


def test_a_cancelled_task_ends_wait_with_81_and_events_follow_to_the_end(logged_in, worker, tmp_path):
    spec = spec_file(tmp_path, "sleep.json", program("import time; time.sleep(600)", name="sleeper"))
    waiter = logged_in.start("task", "submit", "-f", str(spec), "--wait")
    waiter_errors = Lines(waiter.stderr)
    try:
        task_id = waiter_errors.next().split()[1]
        follower = logged_in.start("task", "events", "-f", task_id)
        helpers.wait_for(
            lambda: logged_in.json("task", "get", task_id)["state"] == "RUNNING", timeout=90, what="the task to run"
        )
        cancelled = logged_in("task", "cancel", task_id)
        assert cancelled.returncode == 0 and task_id in cancelled.stdout
        assert waiter.wait(timeout=90) == 81
        assert "CANCELLED (exit status 81)" in waiter_errors.rest()
        out, _ = follower.communicate(timeout=60)
        assert follower.returncode == 0
    finally:
        for process in (waiter, locals().get("follower")):
            if process and process.poll() is None:
                process.kill()
    task = Task.objects.get(pk=task_id)
    assert [int(line.split()[1]) for line in out.splitlines()] == list(range(1, task.last_event_seq + 1))
    assert out.splitlines()[-1].endswith(task.events.order_by("seq").last().message)


def test_a_task_over_its_time_limit_ends_wait_with_82(logged_in, worker):
    document = json.dumps(program("import time; time.sleep(600)", timeout_seconds=2))
    done = logged_in("task", "submit", "-f", "-", "--wait", input=document, timeout=180)
    assert done.returncode == 82, done.stderr
    assert "TIMED_OUT (exit status 82)" in done.stderr


def test_logs_follow_shows_lines_as_they_come_and_resumes_after_a_server_restart(cli, world, worker, own_server):
    """The CLI reads from a Daphne that is killed mid-follow and started again; the Runner reports elsewhere."""
    env = {"CLOUDPIVOT_URL": own_server.url, "CLOUDPIVOT_TOKEN": world.tokens["bob"]}
    document = json.dumps(program(COUNT_SLOWLY.format(n=60, pause=0.2), name="counter"))
    submitted = cli("task", "submit", "-f", "-", input=document, **env)
    assert submitted.returncode == 0, submitted.stderr
    task_id = submitted.stdout.split()[1]
    follower = cli.start("task", "logs", "-f", task_id, **env)
    lines, errors = Lines(follower.stdout), Lines(follower.stderr)
    try:
        first = [lines.next(timeout=90) for _ in range(3)]
        assert first == ["line 000\n", "line 001\n", "line 002\n"]
        assert Task.objects.get(pk=task_id).state == "RUNNING"  # live: the lines came while it ran
        own_server.stop()
        time.sleep(3)  # the program goes on writing while the server is away
        assert follower.poll() is None
        own_server.start()
        rest, said = lines.rest(), errors.rest()
        follower.wait(timeout=10)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, said
    assert "retrying" in said  # it did lose the connection
    assert "".join(first) + rest == "".join(f"line {i:03d}\n" for i in range(60))  # no gap, nothing twice
    assert Task.objects.get(pk=task_id).state == "SUCCEEDED"


def test_a_submit_retried_by_the_cli_while_the_server_is_down_makes_one_task(cli, world, own_server, tmp_path):
    env = {"CLOUDPIVOT_URL": own_server.url, "CLOUDPIVOT_TOKEN": world.tokens["bob"]}
    spec = spec_file(tmp_path, "spec.json", program("print(1)", name="patient"))
    own_server.stop()
    submitting = cli.start("task", "submit", "-f", str(spec), **env)
    try:
        time.sleep(2)
        assert submitting.poll() is None  # still trying
        own_server.start()
        out, errors = submitting.communicate(timeout=90)
    finally:
        if submitting.poll() is None:
            submitting.kill()
    assert submitting.returncode == 0, errors
    assert "retrying" in errors
    assert [str(pk) for pk in Task.objects.filter(name="patient").values_list("pk", flat=True)] == [out.split()[1]]
    down = cli("task", "list", CLOUDPIVOT_URL="http://127.0.0.1:9", CLOUDPIVOT_TOKEN="x", CLOUDPIVOT_RETRY_SECONDS="1")
    assert down.returncode == 88 and "cannot reach" in down.stderr
