"""The soak (issue 16, item 3; docs/benchmarks.md, "Soak"): many tasks across five connections while every process
is restarted in turn, then an account of every task, cloud object, program run and log byte.

Five connections: two `local` ones (each with its own runs directory, so its own host agent), two kmock Kubernetes
clusters whose kubelet a thread plays, and the development OpenStack whose VMs a thread plays (the VM's Runner on
this host, from the user data Nova holds). Several web processes accept on one listening socket that this
process keeps open, so a replacement takes over the port while the others serve; several qclusters share the
queue. Tasks are submitted, cancelled and retried through the REST API over real HTTP.

Each task has a plan (`Plan.kind`) its program follows, counting its runs in a marker file (local, OpenStack) or
by the attempt number in the Job's name (Kubernetes): `ok` succeeds; `flaky` fails its first run and is retried
by its retry_limit; `fail_once` fails its first run with no retry_limit and is retried through the API;
`cancel_pending` is cancelled right after submission; `cancel_running` runs long on its first run and is
cancelled once RUNNING. Some cancelled tasks are retried through the API and then succeed.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tests import helpers
from tests.bench.served import cpu_since, tree_cpu
from tests.soak.players import KubeletPlayer, VmPlayer

FINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELLED", "UNKNOWN"}
KINDS = (("ok", 50), ("flaky", 10), ("fail_once", 10), ("cancel_pending", 15), ("cancel_running", 15))
LOCAL_CLOUDS = ("local", "local-b")
KUBE_CLOUDS = ("k3s-a", "k3s-b")
OPENSTACK_CLOUD = "os-dev"


# ------------------------------------------------------------------------------------------------- plans
@dataclass
class Plan:
    """What one task is and does, and what the driver saw of it."""

    index: int
    cloud: str
    kind: str
    retry_after_cancel: bool
    lines: int
    marker: Path
    hold_seconds: float
    task_id: str = ""
    cancel_status: int = 0  # the HTTP status of the cancel (202 accepted, 409 already ended)
    cancel_state: str = ""  # the task's state in the cancel's answer
    api_retried: bool = False

    @property
    def label(self) -> str:
        return f"soak-{self.index:05d}"

    @property
    def text(self) -> str:
        """What the program prints (and the kubelet player writes): the log each exited attempt must hold."""
        return "".join(f"{self.label} line {i} {'x' * (i % 7) * 9}\n" for i in range(1, self.lines + 1))

    def fails_on_run(self, run: int) -> bool:
        return self.kind in ("flaky", "fail_once") and run == 1

    def holds_on_run(self, run: int) -> bool:
        return self.kind == "cancel_running" and run == 1

    def document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "cloud": self.cloud,
            "name": self.label,
            "retry_limit": 1 if self.kind == "flaky" else 0,
        }
        if self.cloud in KUBE_CLOUDS:  # the kubelet player does what the plan says; the command is for show
            return document | {"image": "busybox", "command": ["sh", "-c", f"echo {self.label}"]}
        hold = f'if [ "$n" -eq 1 ]; then sleep {self.hold_seconds:g}; fi; ' if self.kind == "cancel_running" else ""
        fail = 'if [ "$n" -eq 1 ]; then exit 3; fi; ' if self.kind in ("flaky", "fail_once") else ""
        script = (
            f'echo "${{CLOUDPIVOT_ATTEMPT:-?}}" >> "{self.marker}"; n=$(wc -l < "{self.marker}"); '
            f"printf '%s' '{self.text}'; {hold}{fail}exit 0"
        )
        return document | {"command": ["sh", "-c", script]}


def make_plans(count: int, openstack: int, markers: Path, *, seed: int, hold_seconds: float) -> list[Plan]:
    """`openstack` tasks on os-dev (ok, flaky or fail_once: a VM per attempt is slow), the rest spread evenly over
    the two local and the two Kubernetes connections, kinds drawn by KINDS' weights."""
    rng = random.Random(seed)
    clouds = [OPENSTACK_CLOUD] * min(openstack, count)
    others = LOCAL_CLOUDS + KUBE_CLOUDS
    clouds += [others[i % len(others)] for i in range(count - len(clouds))]
    rng.shuffle(clouds)
    names, weights = zip(*KINDS, strict=True)
    plans = []
    for index, cloud in enumerate(clouds):
        kind = rng.choices(names, weights)[0]
        if cloud == OPENSTACK_CLOUD and kind.startswith("cancel"):
            kind = rng.choice(("ok", "ok", "flaky", "fail_once"))
        plans.append(
            Plan(
                index=index,
                cloud=cloud,
                kind=kind,
                retry_after_cancel=rng.random() < 0.5,
                lines=rng.randint(1, 40),
                marker=markers / f"{index:05d}.runs",
                hold_seconds=hold_seconds,
            )
        )
    return plans


# -------------------------------------------------------------------------------------------- HTTP client
class Api:
    """JSON over one keep-alive connection; a dropped connection (a web process restarting) or a 503 is asked
    again for up to `patience` seconds: a submission carries an Idempotency-Key, so asking again is safe."""

    def __init__(self, url: str, token: str, patience: float = 180) -> None:
        self.host, self.port = url.split("//", 1)[1].split(":")
        self.token, self.patience = token, patience
        self.connection: http.client.HTTPConnection | None = None
        self.reconnects = 0

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None):
        data = json.dumps(body).encode() if body is not None else None
        sent = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json", **(headers or {})}
        deadline = time.monotonic() + self.patience
        while True:
            try:
                if self.connection is None:
                    self.connection = http.client.HTTPConnection(self.host, int(self.port), timeout=60)
                self.connection.request(method, path, body=data, headers=sent)
                response = self.connection.getresponse()
                payload = response.read()
                if response.status != 503:
                    try:
                        return response.status, json.loads(payload) if payload else None
                    except ValueError:  # a 500's HTML page
                        return response.status, payload[:300].decode(errors="replace")
            except (http.client.HTTPException, OSError):
                pass
            self.close()
            self.reconnects += 1
            if time.monotonic() > deadline:
                raise AssertionError(f"{method} {path}: no answer for {self.patience} s")
            time.sleep(0.3)

    def ok(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None):
        status, payload = self.call(method, path, body, headers)
        assert status < 400, f"{method} {path} → {status}: {payload}"
        return payload

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def all_tasks(api: Api) -> dict[str, dict]:
    """Every task the user sees, by id (the list, page by page)."""
    tasks, path = {}, "/api/v1/tasks?limit=500"
    while path:
        page = api.ok("GET", path)
        tasks |= {task["id"]: task for task in page["results"]}
        path = page.get("next") or ""
        if path.startswith("http"):
            path = "/" + path.split("/", 3)[3]
    return tasks


def stored_log(api: Api, task_id: str, attempt: int) -> tuple[str, bool]:
    data, offset, complete = [], 0, False
    while True:
        page = api.ok("GET", f"/api/v1/tasks/{task_id}/logs/?attempt={attempt}&offset={offset}")
        data.append(page["data"])
        complete = page["complete"]
        if page["next_offset"] == offset:
            return "".join(data), complete
        offset = page["next_offset"]


# ---------------------------------------------------------------------------------------------- processes
class Fleet:
    """The web processes (on one listening socket this process holds) and the qclusters; what each used in CPU
    is read just before it is stopped, so a rolling restart loses none of it from the figures."""

    def __init__(self, env: dict[str, str], logs: Path, port: int, runs_dirs: list[Path]) -> None:
        from clusters.management.commands.serve import DEFAULT_WEB_SERVER, WEB_SERVERS

        self.env, self.logs, self.port, self.runs_dirs = env, logs, port, runs_dirs
        self.server = WEB_SERVERS[os.environ.get("CLOUDPIVOT_WEB_SERVER") or DEFAULT_WEB_SERVER]
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(1024)
        self.listener.set_inheritable(True)
        self.web: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []
        self.retired: dict[str, float] = defaultdict(float)
        self.restarts: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_web(self) -> subprocess.Popen:
        fd = self.listener.fileno()
        process = subprocess.Popen(
            [sys.executable, "-m", *self.server, "--fd", str(fd), "cloudpivot.asgi:application"],
            env=self.env,
            cwd=helpers.BASE_DIR,
            stdout=(self.logs / "web.log").open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=(fd,),
        )
        self.web.append(process)
        return process

    def start_worker(self) -> subprocess.Popen:
        process = helpers.start_qcluster(env=self.env, log=self.logs / "qcluster.log")
        self.workers.append(process)
        return process

    def start(self, *, web: int, workers: int) -> None:
        for _ in range(web):
            self.start_web()
        for _ in range(workers):
            self.start_worker()
        helpers.wait_for(lambda: helpers._answers(f"{self.url}/healthz"), timeout=60, what="a web process to answer")

    def agent_pids(self) -> list[int]:
        from clusters.backends.local import agent_pid

        return [pid for pid in (agent_pid(d) for d in self.runs_dirs) if pid and pid > 0]

    def roots(self) -> list[int]:
        return [p.pid for p in self.web + self.workers if p.poll() is None] + self.agent_pids()

    def _retire(self, process: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
        for kind, seconds in tree_cpu([process.pid]).items():
            self.retired[kind] += seconds
        helpers.stop_process_group(process, sig=sig, timeout=30)

    def rolling_restart(self, *, pause: float = 2.0) -> None:
        """Each web process, then each qcluster, then each host agent: a replacement first, then SIGTERM."""
        for old in list(self.web):
            new = self.start_web()
            time.sleep(pause + 3)  # the replacement imports Django and starts accepting meanwhile
            self.web.remove(old)
            self._retire(old)
            self.restarts.append(f"web {old.pid} → {new.pid}")
            time.sleep(pause)
        for old in list(self.workers):
            new = self.start_worker()
            time.sleep(pause)
            self.workers.remove(old)
            self._retire(old)
            self.restarts.append(f"qcluster {old.pid} → {new.pid}")
        from clusters.backends.local import agent_pid, agent_stop

        for runs_dir in self.runs_dirs:
            pid = agent_pid(runs_dir)
            if pid and pid > 0:
                for kind, seconds in tree_cpu([pid]).items():
                    self.retired[kind] += seconds
                agent_stop(runs_dir)
                helpers.wait_for(lambda pid=pid: not helpers.pid_alive(pid), timeout=30, what="the agent to exit")
                self.restarts.append(f"host agent of {runs_dir.name} (SIGTERM; the workers relaunch it)")
            time.sleep(pause)

    def cpu(self) -> dict[str, float]:
        now = tree_cpu(self.roots())
        return {kind: now.get(kind, 0) + self.retired.get(kind, 0) for kind in set(now) | set(self.retired)}

    def stop(self) -> None:
        for process in self.web + self.workers:
            helpers.stop_process_group(process, sig=signal.SIGKILL)
        self.listener.close()


# ------------------------------------------------------------------------------------------------- driver
@dataclass
class Outcome:
    """What the run measured and found wrong."""

    problems: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


def submit_all(api: Api, plans: list[Plan], run_id: str, rate: float) -> None:
    """Submit each plan's task (Idempotency-Key: asking again after a dropped connection makes no second one);
    cancel_pending ones are cancelled at once."""
    for plan in plans:
        started = time.monotonic()
        task = api.ok("POST", "/api/v1/tasks", plan.document(), {"Idempotency-Key": f"{run_id}-{plan.index}"})
        plan.task_id = task["id"]
        if plan.kind == "cancel_pending":
            cancel(api, plan)
        if rate:
            time.sleep(max(0.0, 1 / rate - (time.monotonic() - started)))


def cancel(api: Api, plan: Plan) -> None:
    status, body = api.call("POST", f"/api/v1/tasks/{plan.task_id}/cancel/")
    assert status in (202, 409), (status, body)
    if not plan.cancel_status or status == 202:
        plan.cancel_status, plan.cancel_state = status, (body or {}).get("state", "")


def follow(api: Api, plans: list[Plan], *, timeout: float, explain: Callable[[], list[str]] = list) -> dict[str, dict]:
    """Cancel cancel_running tasks once RUNNING; retry fail_once tasks that FAILED and the cancelled ones whose
    plan says so; until every task is final and nothing is left to do. `explain` adds to a timeout's message."""
    by_id = {plan.task_id: plan for plan in plans}
    deadline = time.monotonic() + timeout
    shown = time.monotonic()
    while True:
        tasks = all_tasks(api)
        busy_ones = []
        for task_id, plan in by_id.items():
            busy = False
            task = tasks.get(task_id)
            if task is None:
                busy_ones.append(plan)
                continue
            state = task["state"]
            if plan.kind == "cancel_running" and not plan.cancel_status:
                if state == "RUNNING":
                    cancel(api, plan)
                if state not in FINAL:
                    busy_ones.append(plan)
                    continue
                # Ended (its hold over) before this loop saw it RUNNING: never cancelled, its outcome stands.
            if state not in FINAL:
                busy = True
            elif not plan.api_retried and (
                (plan.kind == "fail_once" and state == "FAILED")
                or (plan.kind.startswith("cancel") and plan.retry_after_cancel and state == "CANCELLED")
            ):
                status, body = api.call("POST", f"/api/v1/tasks/{task_id}/retry/")
                assert status in (202, 409), (status, body)  # 409 only if a dropped answer was asked again
                plan.api_retried, busy = True, True
            if busy:
                busy_ones.append(plan)
        if not busy_ones:
            return tasks
        open_ones = [(by_id[i], t) for i, t in tasks.items() if i in by_id and t["state"] not in FINAL]
        if time.monotonic() > deadline:
            lines = [f"{p.label} {p.kind} cancel {p.cancel_status} retried {p.api_retried}" for p in busy_ones]
            lines += [f"{p.label} {p.cloud} {t['id']}: {t['state']}, {t['state_reason']}" for p, t in open_ones]
            lines = lines[:30] + explain()
            raise AssertionError(f"the soak did not settle in {timeout} s; not final:\n" + "\n".join(lines))
        if time.monotonic() > shown + 15:
            shown = time.monotonic()
            print(
                f"  {sum(bool(p.task_id) for p in plans)} submitted; open: "
                + str(dict(Counter(f"{p.cloud} {t['state']}" for p, t in open_ones))),
                flush=True,
            )
        time.sleep(1.0)


def expected_state(plan: Plan) -> set[str]:
    if plan.kind.startswith("cancel") and plan.cancel_status == 202:
        if plan.api_retried:
            return {"SUCCEEDED"}
        # Accepted after the program had ended but before its end was recorded: the program's outcome stands.
        return {"CANCELLED"} if plan.kind == "cancel_running" else {"CANCELLED", "SUCCEEDED"}
    return {"SUCCEEDED"}


def check(api: Api, plans: list[Plan], tasks: dict[str, dict], players: list[KubeletPlayer], vm_player) -> list[str]:
    """Every task final and right; one cloud object per attempt; one program run per run; every log byte."""
    problems: list[str] = []
    seen = [p for p in plans if p.task_id in tasks]
    if len(seen) != len(plans):
        problems.append(f"lost: {len(plans) - len(seen)} submitted tasks are not in the list")
    if len(tasks) != len(plans):
        problems.append(f"{len(tasks)} tasks listed for {len(plans)} submitted")
    kube_uids: dict[str, set[str]] = {}
    for player in players:
        kube_uids |= player.uids
    for plan in seen:
        task = tasks[plan.task_id]
        where = f"{plan.label} ({plan.cloud}, {plan.kind}, cancel {plan.cancel_status or '-'} in "
        where += f"{plan.cancel_state or '-'}, api retry {plan.api_retried}) {plan.task_id}"
        if task["state"] not in expected_state(plan):
            problems.append(f"{where}: {task['state']} ({task['state_reason']}), expected {expected_state(plan)}")
        attempts = api.ok("GET", f"/api/v1/tasks/{plan.task_id}/attempts/")["attempts"]
        if task["attempts_count"] != len(attempts):
            problems.append(f"{where}: attempts_count {task['attempts_count']} but {len(attempts)} attempts")
        if plan.cloud in KUBE_CLOUDS:
            for attempt in attempts:
                uids = kube_uids.get(attempt["external_name"], set())
                if len(uids) > 1:
                    problems.append(f"{where}: Job {attempt['external_name']} created {len(uids)} times")
        else:
            # One run per attempt, from the program's own marker. On OpenStack that is what must hold: Nova keeps
            # no name unique, two starts that both found nothing both create, and ensure_started deletes all but
            # the oldest (counted in the figures; no server may be left after cleanup: `leftovers`).
            runs = plan.marker.read_text().splitlines() if plan.marker.exists() else []
            if len(runs) != len(set(runs)) or len(runs) > len(attempts):
                problems.append(f"{where}: program runs {runs} for {len(attempts)} attempts")
            if not plan.kind.startswith("cancel") and len(runs) != len(attempts):
                problems.append(f"{where}: {len(runs)} program runs for {len(attempts)} attempts")
        for attempt in attempts:
            if attempt["exit_code"] is None or attempt["stop_reason"]:
                continue  # stopped (cancelled): its log ends where the stop cut it
            data, complete = stored_log(api, plan.task_id, attempt["number"])
            if data != plan.text or not complete:
                problems.append(
                    f"{where}: attempt {attempt['number']} log {len(data)} bytes (complete={complete}), "
                    f"expected {len(plan.text)}: {data[-120:]!r}"
                )
    return problems


def figures(plans: list[Plan], tasks: dict[str, dict], cpu: dict[str, float]) -> dict:
    def moment(text: str) -> float:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

    ended = [tasks[p.task_id] for p in plans if p.task_id in tasks and tasks[p.task_id]["finished_at"]]
    first = min(moment(t["created_at"]) for t in ended)
    last = max(moment(t["finished_at"]) for t in ended)
    plain = [p for p in plans if p.kind in ("ok", "flaky") and p.task_id in tasks]
    latency: dict[str, list[float]] = defaultdict(list)
    for plan in plain:
        task = tasks[plan.task_id]
        kind = "openstack" if plan.cloud == OPENSTACK_CLOUD else "kubernetes" if plan.cloud in KUBE_CLOUDS else "local"
        latency[kind].append(moment(task["finished_at"]) - moment(task["created_at"]))

    def quantiles(values: list[float]) -> str:
        if len(values) < 2:
            return f"n={len(values)}"
        cuts = statistics.quantiles(values, n=20, method="inclusive")
        return f"p50 {statistics.median(values):.1f} s, p95 {cuts[18]:.1f} s (n={len(values)})"

    total_cpu = sum(cpu.values())
    attempts = sum(t["attempts_count"] for t in tasks.values())
    return {
        "tasks": len(plans),
        "attempts": attempts,
        "kinds": dict(Counter(p.kind for p in plans)),
        "clouds": dict(Counter(p.cloud for p in plans)),
        "states": dict(Counter(t["state"] for t in tasks.values())),
        "wall_seconds": round(last - first, 1),
        "throughput_tasks_per_s": round(len(ended) / (last - first), 2),
        "submit_to_end": {kind: quantiles(values) for kind, values in sorted(latency.items())},
        "cpu_seconds": {kind: round(seconds, 1) for kind, seconds in sorted(cpu.items())},
        "cpu_ms_per_task": round(1000 * total_cpu / len(plans), 1),
        "cpu_ms_per_attempt": round(1000 * total_cpu / max(attempts, 1), 1),
    }


def run_soak(
    *,
    api: Api,
    fleet: Fleet,
    plans: list[Plan],
    kube_players: list[KubeletPlayer],
    vm_player: VmPlayer,
    submitters: int,
    rate: float,
    settle_seconds: float,
) -> Outcome:
    """Submit from `submitters` threads, restart every process once the first quarter is in, follow to the end."""
    outcome = Outcome()
    run_id = uuid.uuid4().hex[:8]
    cpu_before = fleet.cpu()
    shares = [plans[i::submitters] for i in range(submitters)]
    errors: list[BaseException] = []

    def guarded(fn, *args) -> None:
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    threads = [
        threading.Thread(
            target=guarded,
            args=(submit_all, Api(fleet.url, api.token), share, run_id, rate / submitters if rate else 0),
            daemon=True,
        )
        for share in shares
    ]
    for thread in threads:
        thread.start()
    helpers.wait_for(
        lambda: errors or sum(bool(p.task_id) for p in plans) >= len(plans) // 4, timeout=600, what="a quarter in"
    )
    restarter = threading.Thread(target=guarded, args=(fleet.rolling_restart,), daemon=True)
    restarter.start()
    tasks: dict[str, dict] = {}
    try:
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        tasks = follow(api, plans, timeout=settle_seconds, explain=vm_player.describe)
        restarter.join(timeout=settle_seconds)
        if errors:
            raise errors[0]
        assert not restarter.is_alive(), "the rolling restart did not end"
        tasks = follow(
            api, plans, timeout=settle_seconds, explain=vm_player.describe
        )  # (tasks the restart's last steps touched)
    finally:
        cpu = cpu_since(cpu_before, fleet.cpu())
    outcome.figures = figures(plans, tasks, cpu)
    outcome.figures["restarts"] = fleet.restarts
    outcome.figures["openstack_attempts_with_a_transient_second_server"] = sum(
        len(ids) > 1 for ids in vm_player.servers.values()
    )
    outcome.figures["api_reconnects"] = api.reconnects
    outcome.problems = check(api, plans, tasks, kube_players, vm_player) + leftovers(kube_players, vm_player)
    return outcome


def leftovers(kube_players: list[KubeletPlayer], vm_player: VmPlayer, timeout: float = 120) -> list[str]:
    """Every Job and server removed once its attempt ended (cleanup), within `timeout`."""
    vm_player.halt.set()
    vm_player.join(30)

    def left() -> list[str]:
        names = [name for player in kube_players for name in player.kube.jobs()]
        return names + [s.name for s in vm_player.conn.compute.servers(tags=vm_player.tag) if s.status != "DELETED"]

    try:
        helpers.wait_for(lambda: not left(), timeout=timeout, interval=2, what="the cleanup")
    except AssertionError:
        return [f"left behind after {timeout} s: {left()}"]
    return []
