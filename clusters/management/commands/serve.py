"""`manage.py serve`: the whole embedded CloudPivot in one command: Daphne (web, API, Runner API) and the qcluster.

With --bootstrap it first migrates, collects static files, creates the demo data and the
schedules, and prints the URL, the login and a fresh API token once the server answers.
Ctrl-C (or SIGTERM) stops both processes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Run the web server (Daphne) and the background workers (qcluster) together."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--bootstrap",
            action="store_true",
            help="Migrate, collect static files, create demo data and print how to log in.",
        )

    def handle(self, *args, host: str, port: int, bootstrap: bool, **options):
        _check_port_free(host, port)
        banner = self._bootstrap() if bootstrap else []
        env = os.environ | {"PORT": str(port), "DJANGO_SETTINGS_MODULE": os.environ["DJANGO_SETTINGS_MODULE"]}
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", host, "-p", str(port), "cloudpivot.asgi:application"],
                env=env,
                cwd=settings.BASE_DIR,
            ),
            subprocess.Popen([*manage, "qcluster"], env=env, cwd=settings.BASE_DIR),
        ]
        stop = {"now": False}

        def request_stop(signum, frame):
            stop["now"] = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        url = f"http://{host}:{port}/"
        try:
            self._wait_until_up(url, processes, stop)
            self.stdout.write("\nCloudPivot is running: " + url)
            for line in banner:
                self.stdout.write("  " + line)
            self.stdout.write(f"  API docs: {url}api/docs/   Ctrl-C stops the web server and the workers.\n")
            while not stop["now"] and all(p.poll() is None for p in processes):
                time.sleep(0.5)
        finally:
            for process in processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 15
            for process in processes:
                try:
                    process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    process.kill()
        failed = [p.args[2] if p.args[1] == "-m" else p.args[-1] for p in processes if p.returncode not in (0, -15)]
        if failed and not stop["now"]:
            raise CommandError(f"stopped because {', '.join(failed)} exited")

    def _bootstrap(self) -> list[str]:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("sync_schedules", verbosity=0)
        from io import StringIO

        out = StringIO()
        call_command("bootstrap_demo", token=True, stdout=out)
        return out.getvalue().splitlines()

    def _wait_until_up(self, url: str, processes: list[subprocess.Popen], stop: dict) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not stop["now"]:
            if any(p.poll() is not None for p in processes):
                raise CommandError("a process exited during start-up; see its output above")
            try:
                urllib.request.urlopen(url + "healthz", timeout=2).read()
                return
            except OSError:
                time.sleep(0.3)
        if not stop["now"]:
            raise CommandError(f"the web server did not answer at {url} within 60 s")


def _check_port_free(host: str, port: int) -> None:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Daphne does: TIME_WAIT is no obstacle
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandError(
                f"cannot listen on {host}:{port} ({exc.strerror}); "
                "stop what uses it or choose another port with PORT=8001"
            ) from None
