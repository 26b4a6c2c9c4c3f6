"""`manage.py serve`: the whole embedded CloudPivot in one command: the web server (pages, API, Runner API,
websockets; uvicorn, or Daphne with --server daphne) and the qcluster.

With --bootstrap it first migrates, collects static files, creates the demo data and the
schedules, and prints the URL, the login and the demo API token once the server answers (made and printed on
the first start; later starts say where it is kept: bootstrap_demo).
Ctrl-C (or SIGTERM) stops all processes, and so does the exit of any one child: each child leads a
process group of its own, and the whole group is stopped (SIGTERM, a grace, SIGKILL; process_groups.py),
so nothing a child started (the qcluster's workers) is left behind.

It also starts the host agent of each `local` connection once the web server answers (so the first
task does not wait for it, and programs that ran on while CloudPivot was down are re-attached and
reported at once), and stops the agent on Ctrl-C. Programs the agent started keep running: each has
its own supervisor in its own session, and the next agent re-attaches to them (docs/runner.md).

--web-processes N runs N web processes that accept on one listening socket this command
opens (--fd): one process is one Python interpreter, so this is how the web side uses
more than one core.

--agent-processes N (default 1 on PostgreSQL, 0 on SQLite) runs N more web processes for the
host agents alone, on a second listening socket on the loopback (--agent-port, any free port by
default), whose URL the agents this command and the qcluster launch are given
(CLOUDPIVOT_AGENT_SERVER_URL): an agent's long-polls and syncs (the whole life of every task after
its submit) never run in the process that serves a client's submits, and each side has a core
(docs/decisions.md, "The agents' web process"). 0: the agents use the port as before.

With the embedded default's in-process channel layer, the web processes relay their rings to each
other over datagram sockets named here (cloudpivot/channel_layer.py), so a websocket in one process
hears what another rings; with Redis, Redis does that.
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

from cloudpivot.channel_layer import NAME_ENV, PEERS_ENV
from cloudpivot.process_groups import start_group, stop_groups
from clusters.backends.local import agent_pid, agent_stop, running_agent_server_url

# The ASGI servers a web process may run (`python -m <these> --fd N cloudpivot.asgi:application`).
# Both serve HTTP and websockets; uvicorn is the default for what it costs per request (docs/decisions.md).
WEB_SERVERS = {
    "daphne": ["daphne"],
    "uvicorn": ["cloudpivot.webserver"],  # uvicorn with uvloop and httptools, TCP_NODELAY kept (see there)
}
DEFAULT_WEB_SERVER = "uvicorn"


class Command(BaseCommand):
    help = "Run the web server (uvicorn or Daphne) and the background workers (qcluster) together."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--web-processes",
            type=int,
            default=int(os.environ.get("CLOUDPIVOT_WEB_PROCESSES", "1")),
            help="Web processes sharing the port.",
        )
        parser.add_argument(
            "--agent-processes",
            type=int,
            default=None,
            help="Web processes for the host agents alone, on a port of their own (0: the agents use the port). "
            "Default (CLOUDPIVOT_AGENT_WEB_PROCESSES): 1 on PostgreSQL, 0 on SQLite, whose one write lock "
            "makes a submit wait, in sleeps, for the other process's syncs (docs/decisions.md).",
        )
        parser.add_argument(
            "--agent-port",
            type=int,
            default=int(os.environ.get("CLOUDPIVOT_AGENT_PORT", "0")),
            help="The agents' port on the loopback (0: any free port).",
        )
        parser.add_argument(
            "--server",
            choices=sorted(WEB_SERVERS),
            default=os.environ.get("CLOUDPIVOT_WEB_SERVER", DEFAULT_WEB_SERVER),
            help="The ASGI server of the web processes (docs/decisions.md: the request path).",
        )
        parser.add_argument(
            "--stop-grace",
            type=float,
            default=15,
            metavar="SECONDS",
            help="How long the processes have to stop on SIGTERM before their process groups get SIGKILL.",
        )
        parser.add_argument(
            "--bootstrap",
            action="store_true",
            help="Migrate, collect static files, create demo data and print how to log in.",
        )

    def handle(
        self, *args, host, port, web_processes, agent_processes, agent_port, server, stop_grace, bootstrap, **options
    ):
        if agent_processes is None:
            agent_processes = int(os.environ.get("CLOUDPIVOT_AGENT_WEB_PROCESSES", _default_agent_processes()))
        _check_web_processes(web_processes, agent_processes)
        listener = _listen(host, port)
        loopback = "::1" if ":" in host else "127.0.0.1"
        agent_listener = _listen(loopback, agent_port) if agent_processes else None
        banner = self._bootstrap() if bootstrap else []
        env = os.environ | {"PORT": str(port), "DJANGO_SETTINGS_MODULE": os.environ["DJANGO_SETTINGS_MODULE"]}
        if agent_listener is not None:
            agent_url = f"http://{'[::1]' if ':' in loopback else loopback}:{agent_listener.getsockname()[1]}"
            env["CLOUDPIVOT_AGENT_SERVER_URL"] = settings.AGENT_SERVER_URL = agent_url
        # The relay of the in-process channel layer: a name per web process, every child told them all.
        names = [f"cloudpivot-layer-{os.getpid()}-{index}" for index in range(web_processes + agent_processes)]
        env[PEERS_ENV] = ",".join(names)
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        stop = {"now": False}

        def request_stop(signum, frame):
            stop["now"] = True

        # Before the first child starts: from here on a signal to serve stops the children it has started.
        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        url = f"http://{host}:{port}/"
        processes: list[subprocess.Popen] = []
        agents: list = []
        # (socket, processes, a label in the agents' command line: for `ps` and the benchmarks' CPU by process)
        sockets = [(listener, web_processes, ())]
        if agent_listener is not None:
            sockets.append((agent_listener, agent_processes, ("--serves", "agents") if server == "uvicorn" else ()))
        try:
            for sock, count, role in sockets:
                fd = sock.fileno()
                web = [
                    sys.executable,
                    "-m",
                    *WEB_SERVERS[server],
                    "--fd",
                    str(fd),
                    *role,
                    "cloudpivot.asgi:application",
                ]
                for _ in range(count):
                    child_env = env | {NAME_ENV: names[len(processes)]}
                    processes.append(start_group(web, env=child_env, cwd=settings.BASE_DIR, pass_fds=(fd,)))
            processes.append(start_group([*manage, "qcluster"], env=env, cwd=settings.BASE_DIR))
            for sock, _, _ in sockets:
                sock.close()  # the web processes hold them now
            self._wait_until_up(url, processes, stop)
            if agent_listener is not None:
                self._wait_until_up(settings.AGENT_SERVER_URL + "/", processes, stop)
            agents = _start_host_agents(host, port)
            self.stdout.write("\nCloudPivot is running: " + url)
            plural = "es" if web_processes > 1 else ""
            self.stdout.write(f"  {web_processes} web process{plural} ({server}) on the port")
            if agent_listener is not None:
                plural = "es" if agent_processes > 1 else ""
                self.stdout.write(
                    f"  {agent_processes} web process{plural} for the host agents on {settings.AGENT_SERVER_URL}"
                )
            for line in banner:
                self.stdout.write("  " + line)
            self.stdout.write(f"  API docs: {url}api/docs/   Ctrl-C stops the web server and the workers.\n")
            if not stop["now"]:
                self.stdout.flush()
                _watch_without_django(processes, agents, stop_grace)  # returns only if the exec failed
            while not stop["now"] and all(p.poll() is None for p in processes):
                time.sleep(0.5)
        finally:
            for runs_dir in agents:
                agent_stop(runs_dir)  # its programs run on; the next agent re-attaches to them
            stop_groups(processes, grace=stop_grace)  # what each child started goes with it
        failed = [_name(p) for p in processes if p.returncode not in (0, -15)]
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


def _start_host_agents(host: str, port: int) -> list:
    """The host agent of every `local` connection, reporting to this server (to the agents' web process).

    An agent left running by an earlier serve that reports elsewhere (that serve was killed, its agents'
    port is gone) is stopped first and started again with this URL: its programs run on, and it re-attaches."""
    from clusters.backends.base import BackendError
    from clusters.backends.local import LocalBackend, agent_server_url
    from clusters.models import CloudConnection

    if not os.environ.get("CLOUDPIVOT_RUNNER_SERVER_URL"):
        settings.RUNNER_SERVER_URL = f"http://{'[::1]' if ':' in host else '127.0.0.1'}:{port}"
    started = []
    for connection in CloudConnection.objects.filter(backend="local"):
        backend = LocalBackend(connection)
        elsewhere = running_agent_server_url(backend.runs_dir)
        if elsewhere not in (None, agent_server_url()) and agent_stop(backend.runs_dir):
            deadline = time.monotonic() + 10
            while agent_pid(backend.runs_dir) is not None and time.monotonic() < deadline:
                time.sleep(0.1)
        try:
            backend.ensure_agent()
        except BackendError as exc:  # not fatal: the first task's start tries again and says why
            sys.stderr.write(f"warning: {exc.message}\n")
            continue
        started.append(backend.runs_dir)
    return started


def _watch_without_django(processes: list[subprocess.Popen], agents: list, grace: float) -> None:
    """From here serve only waits: exec cloudpivot/serve_watch.py in its place, a process of the standard library
    that does the same waiting and stopping without Django's memory (docs/benchmarks.md, idle memory)."""
    command = [sys.executable, "-m", "cloudpivot.serve_watch", "--grace", str(grace)]
    for runs_dir in agents:
        command += ["--agent-lock", str(runs_dir / "agent.lock")]
    command += [f"{_name(process)}={process.pid}" for process in processes]
    sys.stdout.flush()
    sys.stderr.flush()
    stops = (signal.SIGINT, signal.SIGTERM)
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # held across the exec, taken by serve_watch once it listens
    try:
        os.chdir(settings.BASE_DIR)  # where `-m cloudpivot.…` is found
        os.execv(sys.executable, command)
    except OSError as exc:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        sys.stderr.write(f"warning: serve keeps watching with Django loaded ({exc})\n")


def _default_agent_processes() -> str:
    """1 where writers do not queue on one lock (PostgreSQL); 0 on SQLite, measured (docs/benchmarks.md, 2026-12-03
    13:35–13:46): with the agents' syncs in another process, a submit's write waited for SQLite's lock in the
    busy handler's sleeps (submits 15.7/s → 4.5/s), where in one process the sync thread serialises them."""
    return "0" if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3") else "1"


def _check_web_processes(count: int, agent_count: int) -> None:
    if count < 1:
        raise CommandError(f"--web-processes must be at least 1, not {count}")
    if agent_count < 0:
        raise CommandError(f"--agent-processes must be 0 or more, not {agent_count}")


def _listen(host: str, port: int) -> socket.socket:
    """The one listening socket every web process accepts on; opening it here also says at once if the port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Daphne does: TIME_WAIT is no obstacle
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise CommandError(
            f"cannot listen on {host}:{port} ({exc.strerror}); stop what uses it or choose another port with PORT=8001"
        ) from None
    listener.listen(1024)
    listener.set_inheritable(True)
    return listener


def _name(process: subprocess.Popen) -> str:
    if process.args[1] != "-m":
        return process.args[-1]
    return process.args[2] + (" (agents)" if "agents" in process.args else "")
