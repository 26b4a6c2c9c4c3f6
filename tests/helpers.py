"""Helpers shared by the tests: polling with a deadline, servers on loopback, process checks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from cloudpivot.process_groups import group_alive

BASE_DIR = Path(settings.BASE_DIR)


def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 30, interval: float = 0.1, what: str | Callable[[], str] = "it"
):
    """Poll until `predicate()` is truthy; fail with `what` (text, or a function giving it) at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what() if callable(what) else what}")
        time.sleep(interval)


def drive(task: Any, until: set[str], *, timeout: float = 30, interval: float = 0.1) -> Any:
    """Run reconcile passes, as the ticker job does, until the task reaches one of `until`."""
    from tasks.services import reconcile_pass

    def reached() -> bool:
        reconcile_pass()
        task.refresh_from_db()
        return task.state in until

    wait_for(
        reached,
        timeout=timeout,
        interval=interval,
        what=lambda: f"the task to reach {sorted(until)}; it is {task.state}: {task.state_reason}",
    )
    return task


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def database_url() -> str:
    """The URL of the test database (as pytest-django created it), for server subprocesses."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def server_environment(*, port: int, runs_dir: Path) -> dict[str, str]:
    """What a Daphne or qcluster subprocess needs to share this test run's database, queue and secrets."""
    env = {key: value for key, value in os.environ.items() if key not in ("DJANGO_SETTINGS_MODULE",)}
    env.update(
        {
            # The test settings: the test database's password hashes (MD5) and static files without collectstatic.
            "DJANGO_SETTINGS_MODULE": "cloudpivot.settings.test",
            "DATABASE_URL": database_url(),
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,
            "CLOUDPIVOT_VAR_DIR": str(settings.VAR_DIR),
            "CLOUDPIVOT_RUNS_DIR": str(runs_dir),
            "CLOUDPIVOT_QUEUE_NAME": settings.Q_CLUSTER["name"],
            "CLOUDPIVOT_RUNNER_SERVER_URL": f"http://127.0.0.1:{port}",
            "CLOUDPIVOT_LOG_LEVEL": "WARNING",
            "PORT": str(port),
            # The schema fuzzing and the load tests call far faster than a token may (tests/e2e/test_api_capacity.py
            # and tests/cloudpivot/test_api_limits.py test the rate).
            "CLOUDPIVOT_API_TOKEN_RATE": "0",
        }
    )
    if settings.REDIS_URL:
        env["REDIS_URL"] = settings.REDIS_URL
    return env


def start_daphne(*, port: int, env: dict[str, str], log: Path) -> subprocess.Popen:
    return start_daphnes(port=port, env=env, log=log, processes=1)[0]


def start_daphnes(*, port: int, env: dict[str, str], log: Path, processes: int) -> list[subprocess.Popen]:
    """`processes` web servers accepting on one listening socket, as `manage.py serve --web-processes` runs them:
    the server `serve` runs by default, or the one CLOUDPIVOT_WEB_SERVER names (daphne, uvicorn)."""
    from clusters.management.commands.serve import DEFAULT_WEB_SERVER, WEB_SERVERS

    server = WEB_SERVERS[os.environ.get("CLOUDPIVOT_WEB_SERVER") or DEFAULT_WEB_SERVER]
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(1024)
    listener.set_inheritable(True)
    fd = listener.fileno()
    started = [
        subprocess.Popen(
            [sys.executable, "-m", *server, "--fd", str(fd), "cloudpivot.asgi:application"],
            env=env,
            cwd=BASE_DIR,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=(fd,),
        )
        for _ in range(processes)
    ]
    listener.close()
    wait_for(
        lambda: _answers(f"http://127.0.0.1:{port}/healthz") or any(p.poll() is not None for p in started),
        timeout=30,
        what="Daphne to answer",
    )
    assert all(p.poll() is None for p in started), f"Daphne exited: {log.read_text()[-2000:]}"
    return started


def manage(*args: str, env: dict[str, str], timeout: float = 300) -> str:
    """`manage.py <args>` in a CloudPivot of the test's own (its environment); its output. Failing is the test's
    failure, with the command's last output."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], env=env, cwd=BASE_DIR, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


def start_qcluster(*, env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        env=env,
        cwd=BASE_DIR,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_process_group(process: subprocess.Popen, *, sig: int = 15, timeout: float = 15) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
        process.wait(timeout=timeout)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, 9)
        except ProcessLookupError:
            pass
        process.wait(timeout=5)


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1).read()
        return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


process_group_alive = group_alive  # True while any live (non-zombie) process is in the group


def processes() -> dict[int, tuple[int, int, str]]:
    """pid → (parent pid, utime+stime+cutime+cstime in clock ticks, command line) of every process, from /proc."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), sum(int(v) for v in fields[11:15]), command)
    return table


def descendants(roots: list[int], table: dict[int, tuple[int, int, str]] | None = None) -> set[int]:
    """The roots that exist and every process below them (parent pids from `table`, or /proc now)."""
    table = processes() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    seen, stack = set(), [pid for pid in roots if pid in table]
    while stack:
        pid = stack.pop()
        if pid not in seen:
            seen.add(pid)
            stack += children.get(pid, [])
    return seen


def api_call(base_url: str, method: str, path: str, token: str, body: dict | None = None, timeout: float = 10) -> Any:
    """One real HTTP request to a CloudPivot server, as a business system makes it."""
    request = urllib.request.Request(
        base_url + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


# Debian's Chromium, headless, with no reach beyond loopback (the machines have no other network).
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


CSRF_FIELD = "csrfmiddlewaretoken"
_URL_ATTRIBUTES = ("href", "src", "action", "formaction", "hx-get", "hx-post", "hx-delete", "hx-put", "hx-patch")


def csrf_problems(page_html: str) -> list[str]:
    """What a page does wrong with its CSRF token, in words (empty: nothing).

    The token must never be in a URL (a link, a GET form, an htmx GET: it would end up in logs, history and
    Referer headers), and every htmx POST must carry it: from the `hx-headers` on <body> (X-CSRFToken, with a
    value) or a form field it includes."""
    from html.parser import HTMLParser

    problems: list[str] = []

    class Reader(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.forms: list[str] = []  # method of each open <form>
            self.form_token = self.form_get_button = False
            self.header_token = False
            self.hx_posts: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found = {name: value or "" for name, value in attrs}
            for name in _URL_ATTRIBUTES:
                if CSRF_FIELD in found.get(name, ""):
                    problems.append(f"<{tag} {name}> carries the CSRF token in a URL: {found[name][:120]}")
            if tag == "body" and '"X-CSRFToken": "' in found.get("hx-headers", ""):
                self.header_token = not found["hx-headers"].endswith('"X-CSRFToken": ""}')
            if tag == "form":
                self.forms.append((found.get("method") or "get").lower())
                self.form_token = self.form_get_button = False
            elif tag == "input" and found.get("name") == CSRF_FIELD:
                self.form_token = True
                if self.forms and self.forms[-1] == "get":
                    problems.append("a GET form holds the CSRF token: submitting it puts the token in the URL")
            elif tag in ("button", "input") and found.get("formmethod", "").lower() == "get":
                self.form_get_button = True
            if "hx-post" in found:
                self.hx_posts.append(f"<{tag} hx-post={found['hx-post']!r}>")

        def handle_endtag(self, tag: str) -> None:
            if tag == "form" and self.forms:
                self.forms.pop()
                if self.form_token and self.form_get_button:
                    problems.append(
                        "a form with the CSRF token has a formmethod=get button: it sends the token in a URL"
                    )

    reader = Reader()
    reader.feed(page_html)
    if reader.hx_posts and not reader.header_token:
        problems += [f"{post} sends no CSRF token (no X-CSRFToken in <body hx-headers>)" for post in reader.hx_posts]
    return problems
