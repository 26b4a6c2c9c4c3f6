"""`make run` as a new user meets it: one command, then the printed token works against the printed URL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests import helpers

pytestmark = pytest.mark.e2e


def test_serve_bootstraps_runs_a_task_and_stops_on_ctrl_c(tmp_path):
    port = helpers.free_port()
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")}
    env |= {
        "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.base",
        "CLOUDPIVOT_VAR_DIR": str(tmp_path / "var"),
        "PORT": str(port),
        "CLOUDPIVOT_QUEUE_NAME": f"serve-test-{os.getpid()}",
    }
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--bootstrap"],
        cwd=helpers.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        lines = []
        deadline = time.monotonic() + 90
        while not any(line.startswith("  api token:") for line in lines):
            assert time.monotonic() < deadline and process.poll() is None, "".join(lines)
            lines.append(process.stdout.readline())
        output = "".join(lines)
        assert f"CloudPivot is running: http://127.0.0.1:{port}/" in output
        assert "  user: admin" in output and "  password: " in output
        token = next(line.split()[-1] for line in lines if line.startswith("  api token:"))
        url = f"http://127.0.0.1:{port}/api/v1/tasks"

        def call(method, path="", body=None):
            return helpers.api_call(url, method, path, token, body)

        program = "import time; print('hello'); time.sleep(2); print('bye')"
        task = call("POST", body={"cloud": "local", "command": ["python3", "-c", program]})
        helpers.wait_for(
            lambda: call("GET", f"/{task['id']}")["state"] in ("SUCCEEDED", "FAILED", "UNKNOWN"),
            timeout=60,
            interval=0.3,
            what="the task to finish",
        )
        assert call("GET", f"/{task['id']}")["state"] == "SUCCEEDED"
        assert call("GET", f"/{task['id']}/logs")["data"] == "hello\nbye\n"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        finally:
            helpers.stop_process_group(process, sig=signal.SIGKILL)
    assert process.returncode == 0, process.stdout.read()
