"""Production-like on one host (issue 16, item 5): the production settings, two uvicorn web processes, a
qcluster, the host agent, PostgreSQL, Redis and Debian's nginx terminating TLS with a self-signed certificate,
configured by deploy/nginx/cloudpivot.conf as shipped. A business system submits, follows and cancels through
the proxy over HTTPS; a researcher's browser follows a live log over the proxied websocket and cancels there;
the host agent reports over HTTPS, trusting the certificate through SSL_CERT_FILE.

Runs in the PostgreSQL + Redis half of the suite: the embedded default is one process and needs no proxy.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.db import connection
from playwright.sync_api import expect

from tasks.models import Task
from tests import helpers

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql" or not settings.REDIS_URL,
        reason="the production layout runs on PostgreSQL + Redis (the suite's second half)",
    ),
]

ROOT = helpers.BASE_DIR
SITE = ROOT / "deploy" / "nginx" / "cloudpivot.conf"
ENTRYPOINT = ROOT / "deploy" / "container" / "entrypoint.sh"
FINISHED = {"SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT", "UNKNOWN"}
SLOW_LINES = "import time\nfor i in range(1, 7):\n    print(f'line {i}', flush=True)\n    time.sleep(0.5)\n"


def _certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cloudpivot.pem", directory / "cloudpivot.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


def _nginx_config(directory: Path, *, https_port: int, http_port: int, web_port: int, cert: Path, key: Path) -> Path:
    """The shipped site file with only its ports, name and certificate swapped, inside a main config of the test's
    own (its own pid file, logs and temp paths: the machine's nginx, if any, is left alone)."""
    site = SITE.read_text()
    for shipped, ours in {
        "listen 443 ssl;": f"listen 127.0.0.1:{https_port} ssl;",
        "listen 80;": f"listen 127.0.0.1:{http_port};",
        "server 127.0.0.1:8000;": f"server 127.0.0.1:{web_port};",
        "server_name cloudpivot.example.org;": "server_name 127.0.0.1;",
        "/etc/ssl/certs/cloudpivot.pem": str(cert),
        "/etc/ssl/private/cloudpivot.key": str(key),
    }.items():
        assert shipped in site, f"deploy/nginx/cloudpivot.conf no longer has {shipped!r}: update this test"
        site = site.replace(shipped, ours)
    (directory / "site.conf").write_text(site)
    main = directory / "nginx.conf"
    main.write_text(
        f"user root;\nworker_processes 2;\ndaemon off;\npid {directory}/nginx.pid;\n"
        f"error_log {directory}/error.log warn;\nevents {{ worker_connections 512; }}\n"
        f"http {{\n  access_log {directory}/access.log;\n"
        + "".join(
            f"  {kind}_temp_path {directory}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        + f"  include {directory}/site.conf;\n}}\n"
    )
    return main


def _start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        command, env=env, cwd=ROOT, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
    )


def _status(url: str) -> int:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


@pytest.fixture
def stack(world, tmp_path, monkeypatch):
    """nginx → 2 × uvicorn (entrypoint `web`) + qcluster (entrypoint `worker`), production settings."""
    if not shutil.which("nginx"):
        pytest.fail("nginx is missing: `apt-get install -y nginx` (make test installs it)")
    cert, key = _certificate(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # this test's own HTTPS client trusts the certificate
    web_port, https_port, http_port = helpers.free_port(), helpers.free_port(), helpers.free_port()
    base = f"https://127.0.0.1:{https_port}"
    (tmp_path / "secret-key").write_text(settings.SECRET_KEY)
    (tmp_path / "secrets-key").write_text(Fernet.generate_key().decode())
    env = helpers.server_environment(port=web_port, runs_dir=world.runs_dir) | {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOST": "127.0.0.1",
        "CLOUDPIVOT_STATIC_ROOT": str(tmp_path / "static"),
        "CLOUDPIVOT_RUNNER_SERVER_URL": base,
        "SSL_CERT_FILE": str(cert),  # the host agent (launched by a worker) verifies the proxy with it
    }
    collected = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        env=env
        | {"CLOUDPIVOT_VAR_DIR": str(tmp_path / "build-var"), "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.base"},
        cwd=ROOT,
        capture_output=True,
        timeout=300,
    )
    assert collected.returncode == 0, collected.stderr
    del env["DJANGO_SECRET_KEY"]
    env |= {
        "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.prod",
        "DJANGO_SECRET_KEY_FILE": str(tmp_path / "secret-key"),
        "CLOUDPIVOT_SECRETS_KEY_FILE": str(tmp_path / "secrets-key"),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_CSRF_TRUSTED_ORIGINS": base,
        "CLOUDPIVOT_WEB_PROCESSES": "2",
        "FORWARDED_ALLOW_IPS": "127.0.0.1",
    }
    config = _nginx_config(tmp_path, https_port=https_port, http_port=http_port, web_port=web_port, cert=cert, key=key)
    processes = [
        _start([str(ENTRYPOINT), "web"], env, tmp_path / "web.log"),
        _start([str(ENTRYPOINT), "worker"], env, tmp_path / "worker.log"),
        _start(["nginx", "-c", str(config), "-p", str(tmp_path)], env, tmp_path / "nginx.out"),
    ]
    try:
        helpers.wait_for(
            lambda: _status(base + "/readyz") == 200 or any(p.poll() is not None for p in processes),
            timeout=60,
            what="the stack to answer through nginx",
        )
        assert all(p.poll() is None for p in processes), [
            (tmp_path / f).read_text()[-2000:] for f in ("web.log", "nginx.out", "error.log") if (tmp_path / f).exists()
        ]
        yield SimpleNamespace(url=base, access_log=tmp_path / "access.log")
    finally:
        for process in processes:
            helpers.stop_process_group(process)
    logs = (tmp_path / "web.log").read_text() + (tmp_path / "worker.log").read_text()
    assert "Internal Server Error" not in logs and "Traceback" not in logs, logs[-3000:]


def _wait_state(base: str, token: str, task_id: str, states: set[str], timeout: float = 60) -> dict:
    found = {}

    def reached() -> bool:
        found.update(helpers.api_call(base, "GET", f"/api/v1/tasks/{task_id}", token))
        return found["state"] in states

    helpers.wait_for(reached, timeout=timeout, what=f"task {task_id} to reach {sorted(states)}")
    return found


def test_a_business_system_submits_follows_and_cancels_through_the_tls_proxy(world, stack):
    base, token = stack.url, world.tokens["bob"]
    assert _status(base.replace("https:", "http:") + "/tasks/") == 400  # plain HTTP on the TLS port is refused
    created = helpers.api_call(
        base, "POST", "/api/v1/tasks", token, {"cloud": "local", "command": ["python3", "-c", SLOW_LINES]}
    )
    text, offset, seen_running_text = "", 0, False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        page = helpers.api_call(base, "GET", f"/api/v1/tasks/{created['id']}/logs?offset={offset}", token)
        text, offset = text + page["data"], page["next_offset"]
        state = helpers.api_call(base, "GET", f"/api/v1/tasks/{created['id']}", token)["state"]
        seen_running_text |= state == "RUNNING" and "line 1" in text
        if state in FINISHED and page["data"] == "":
            break
        time.sleep(0.2)
    assert state == "SUCCEEDED"
    assert seen_running_text, "the log was readable through the proxy while the program ran"
    assert text == "".join(f"line {i}\n" for i in range(1, 7))  # the agent reported every byte over HTTPS

    sleeper = helpers.api_call(base, "POST", "/api/v1/tasks", token, {"cloud": "local", "command": ["sleep", "600"]})
    _wait_state(base, token, sleeper["id"], {"RUNNING"})
    helpers.api_call(base, "POST", f"/api/v1/tasks/{sleeper['id']}/cancel", token, {})
    assert _wait_state(base, token, sleeper["id"], FINISHED)["state"] == "CANCELLED"
    assert re.search(r'"POST /runner/v2/sync HTTP/1.1" 200', stack.access_log.read_text())  # the agent came via TLS


def test_a_researcher_follows_a_live_log_over_the_proxied_websocket_and_cancels(world, stack, browser):
    base, token = stack.url, world.tokens["bob"]
    world.bob.password = make_password("pw-bob", hasher="pbkdf2_sha256")  # the production settings' hasher
    world.bob.save(update_fields=["password"])
    context = browser.new_context(base_url=base, ignore_https_errors=True)
    try:
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto("/tasks/")
        page.get_by_label("Username or email").fill("bob")
        page.get_by_label("Password").fill("pw-bob")
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(re.compile(r"/tasks/$"))
        page.goto("/")
        expect(page.locator("[data-live-status]")).to_have_text("Live")  # the dashboard's websocket is up

        program = "import time\nfor i in range(1, 9):\n    print(f'step {i}', flush=True)\n    time.sleep(0.7)\n"
        task = helpers.api_call(
            base, "POST", "/api/v1/tasks", token, {"cloud": "local", "command": ["python3", "-c", program]}
        )
        page.goto(f"/tasks/{task['id']}/")
        page.evaluate("window.__notReloaded = true")
        log = page.locator("#task-log")
        expect(log).to_contain_text("step 2", timeout=30_000)
        assert "step 8" not in log.inner_text()  # it streamed in over the websocket while the program ran
        expect(log).to_contain_text("step 8", timeout=30_000)
        assert page.evaluate("window.__notReloaded") is True

        sleeper = helpers.api_call(
            base, "POST", "/api/v1/tasks", token, {"cloud": "local", "command": ["sleep", "600"]}
        )
        page.goto(f"/tasks/{sleeper['id']}/")
        badge = page.locator(f'[data-task-badge="{sleeper["id"]}"]').first
        expect(badge).to_have_attribute("data-state", "RUNNING", timeout=30_000)
        page.get_by_role("button", name="Cancel").click()  # a form POST: CSRF through the proxy's origin
        expect(page.locator(".message.success")).to_contain_text("Cancel requested")
        expect(badge).to_have_attribute("data-state", "CANCELLED", timeout=30_000)
    finally:
        context.close()
    assert Task.objects.get(pk=sleeper["id"]).state == "CANCELLED"
    proxied = stack.access_log.read_text()
    assert re.search(rf'"GET /ws/tasks/{task["id"]}/\S* HTTP/1.1" 101', proxied)  # the live log's websocket


AGENTS_UNIT = ROOT / "deploy" / "systemd" / "cloudpivot-agents-web.service"


def test_the_shipped_agents_web_unit_answers_the_agent_over_plain_http_without_a_redirect(world, tmp_path):
    """The unit as shipped (its ExecStart and Environment, on a free port): production settings, no proxy;
    the agent's sync must reach the view, not a 301 to https (issue 34)."""
    lines = AGENTS_UNIT.read_text().replace("\\\n", " ").splitlines()
    exec_start = next(line.split("=", 1)[1] for line in lines if line.startswith("ExecStart="))
    unit_env = dict(line.split("=", 1)[1].split("=", 1) for line in lines if line.startswith("Environment="))
    port = helpers.free_port()
    command = [sys.executable if part.endswith("/python") else part for part in exec_start.split()]
    command[command.index("--port") + 1] = str(port)
    (tmp_path / "secret-key").write_text(settings.SECRET_KEY)
    (tmp_path / "secrets-key").write_text(Fernet.generate_key().decode())
    env = helpers.server_environment(port=port, runs_dir=world.runs_dir)
    del env["DJANGO_SECRET_KEY"]
    env |= {
        "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.prod",
        "DJANGO_SECRET_KEY_FILE": str(tmp_path / "secret-key"),
        "CLOUDPIVOT_SECRETS_KEY_FILE": str(tmp_path / "secrets-key"),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "CLOUDPIVOT_STATIC_ROOT": str(tmp_path / "static"),
        **unit_env,
    }
    process = _start(command, env, tmp_path / "agents-web.log")
    try:
        helpers.wait_for(lambda: _status(f"http://127.0.0.1:{port}/healthz") == 200, timeout=60, what="the unit up")
        assert _status(f"http://127.0.0.1:{port}/runner/v2/sync") == 405  # the view answered (POST only): no 301
    finally:
        helpers.stop_process_group(process)
