"""The task list at scale, shared by bench_task_list.py and bench_streaming.py: 100,000 tasks bulk-inserted over
several projects and users, and GET /api/v1/tasks timed over HTTP on one keep-alive connection."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from cloudpivot.accounts.models import Membership, Project, Role
from cloudpivot.accounts.services import api_token_create
from clusters.models import CloudConnection
from tasks.models import Task
from tasks.services.submission import task_submit
from tests.bench.served import KeepAliveClient
from tests.builders import hello_spec

# Finished tasks dominate a real table; a few hundred are waiting or running (issue 11's 100 streaming ones).
STATES = [("SUCCEEDED", 80), ("FAILED", 15), ("CANCELLED", 3), ("TIMED_OUT", 1), ("PENDING", 0.5), ("RUNNING", 0.5)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def seed(world: Any, total: int, runs_dir: Any, *, projects: int = 5, users_per_project: int = 4) -> dict[str, Any]:
    """`total` tasks over `projects` projects (alpha, the world's, and more), each with a few submitters, created
    over 30 days. Returns who to ask as: a one-project member (bob), a member of every project, staff."""
    User = get_user_model()
    extra = [Project.objects.create(slug=f"lab{i}", name=f"Lab {i}") for i in range(projects - 1)]
    every = [world.alpha, *extra]
    # Their own connection with dispatch off: the reconciler running beside the benchmark must not admit the
    # seeded PENDING tasks nor look for the seeded RUNNING ones' executions.
    seeded = CloudConnection.objects.create(
        cloud_id="seeded", backend="local", options={"runs_dir": str(runs_dir)}, dispatch_enabled=False
    )
    seeded.projects.add(*every)
    owners = {world.alpha.pk: [world.bob, world.alice]}
    for project in extra:
        owners[project.pk] = []
        for j in range(users_per_project):
            user = User.objects.create_user(f"{project.slug}-u{j}", f"{project.slug}-u{j}@example.org", "pw")
            Membership.objects.create(project=project, user=user, role=Role.SUBMITTER)
            owners[project.pk].append(user)
    many = User.objects.create_user("many", "many@example.org", "pw-many")
    for project in every:
        Membership.objects.create(project=project, user=many, role=Role.READER)
    staff = User.objects.create_superuser("staff", "staff@example.org", "pw-staff")
    template, _ = task_submit(user=world.bob, document=hello_spec())
    started = time.monotonic()
    if connection.vendor == "postgresql":
        _insert_postgres(total, template, every, owners, seeded.pk)
    else:
        _insert_orm(total, template, every, owners, seeded)
        _spread_created_at()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ANALYZE tasks_task")
        else:
            cursor.execute("ANALYZE")
    return {
        "seconds": time.monotonic() - started,
        "tokens": {
            "one project (bob)": world.tokens["bob"],
            f"{projects} projects": api_token_create(user=many, name="bench")[1],
            "staff (all)": api_token_create(user=staff, name="bench")[1],
        },
        "project": extra[0].slug if extra else world.alpha.slug,
    }


def _insert_orm(total: int, template: Task, every: list, owners: dict, local: Any) -> None:
    states, weights = zip(*STATES, strict=True)
    rng = random.Random(11)
    now = timezone.now()
    batch: list[Task] = []
    for i in range(total):
        project = every[i % len(every)]
        state = rng.choices(states, weights)[0]
        batch.append(
            Task(
                id=uuid.uuid4(),
                project=project,
                owner=owners[project.pk][i % len(owners[project.pk])],
                connection=local,
                backend="local",
                name=f"seeded {i}",
                spec=template.spec,
                spec_sha256=template.spec_sha256,
                normalized=template.normalized,
                state=state,
                finished_at=now if state not in ("PENDING", "RUNNING") else None,
                attempts_count=0 if state == "PENDING" else 1,
            )
        )
        if len(batch) == 5000:
            Task.objects.bulk_create(batch)
            batch = []
    Task.objects.bulk_create(batch)


def _insert_postgres(total: int, template: Task, every: list, owners: dict, connection_id: int) -> None:
    """One INSERT … SELECT over generate_series: the same rows as _insert_orm in seconds instead of minutes."""
    projects = [project.pk for project in every]
    owner_rows = [[user.pk for user in owners[pk]] for pk in projects]
    width = max(len(row) for row in owner_rows)
    owner_rows = [(row * width)[:width] for row in owner_rows]  # a rectangular array
    bounds, acc = [], 0.0
    for state, weight in STATES:
        acc += weight / sum(w for _, w in STATES)
        bounds.append((state, acc))
    case = " ".join(f"WHEN r < {bound} THEN '{state}'" for state, bound in bounds[:-1]) + f" ELSE '{bounds[-1][0]}'"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO tasks_task (id, project_id, owner_id, connection_id, backend, name, spec, spec_sha256,
                normalized, idempotency_key, state, state_reason, state_changed_at, last_event_seq, retry_limit,
                attempts_count, failed_attempts, finished_at, created_at, updated_at)
            SELECT gen_random_uuid(), p, o, %s, 'local', 'seeded ' || g, %s::jsonb, %s, %s::jsonb, '', s, '', now(),
                0, 0, CASE WHEN s = 'PENDING' THEN 0 ELSE 1 END, 0,
                CASE WHEN s IN ('PENDING', 'RUNNING') THEN NULL ELSE now() END,
                now() - random() * interval '30 days', now()
            FROM (
                SELECT g, (%s::int[])[1 + g %% %s] AS p,
                       (%s::int[][])[1 + g %% %s][1 + (g / %s) %% %s] AS o,
                       (CASE {case} END) AS s
                FROM (SELECT g, random() AS r FROM generate_series(0, %s - 1) AS g) AS numbers
            ) AS rows
            """,
            [
                connection_id,
                json.dumps(template.spec),
                template.spec_sha256,
                json.dumps(template.normalized),
                projects,
                len(projects),
                owner_rows,
                len(projects),
                len(projects),
                width,
                total,
            ],
        )


def _spread_created_at() -> None:
    """Bulk inserts share one created_at; a real table has them spread out (the list sorts by it)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE tasks_task SET created_at = strftime('%Y-%m-%d %H:%M:%f', 'now', "
            "'-' || (abs(random()) % 2592000) || ' seconds') WHERE name LIKE 'seeded %'"
        )


QUERIES = [
    ("default page (50)", "/api/v1/tasks"),
    ("state=FAILED", "/api/v1/tasks?state=FAILED"),
    ("state=PENDING (rare)", "/api/v1/tasks?state=PENDING"),
    ("state=RUNNING&state=PENDING", "/api/v1/tasks?state=RUNNING&state=PENDING"),
    ("project=<slug>", "/api/v1/tasks?project={project}"),
    ("second page (cursor)", "NEXT"),
]


def measure(url: str, tokens: dict[str, str], project: str, runs: int = 20) -> list[dict[str, Any]]:
    """p50/p95 of each list request as each kind of user, over HTTP (one keep-alive connection each)."""
    rows = []
    for who, token in tokens.items():
        client = KeepAliveClient(url, token)
        try:
            first = client.call("GET", "/api/v1/tasks")
            nxt = urlsplit(first.get("next") or "/api/v1/tasks")
            second = f"{nxt.path}?{nxt.query}"
            for label, path in QUERIES:
                path = second if path == "NEXT" else path.format(project=project)
                times = []
                client.call("GET", path)  # warm
                for _ in range(runs):
                    began = time.perf_counter()
                    client.call("GET", path)
                    times.append(time.perf_counter() - began)
                rows.append({"who": who, "query": label, "p50": percentile(times, 0.5), "p95": percentile(times, 0.95)})
        finally:
            client.close()
    return rows


def print_rows(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"  {title}")
    for row in rows:
        flag = "" if row["p95"] < 0.1 else "   ← over 100 ms"
        p50, p95 = row["p50"] * 1000, row["p95"] * 1000
        print(f"    {row['who']:20s} {row['query']:30s} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms{flag}")


class Lister(threading.Thread):
    """One client asking for the task list's first page over and over (every `gap` seconds) on one connection."""

    def __init__(self, url: str, token: str, gap: float) -> None:
        super().__init__(daemon=True)
        self.client = KeepAliveClient(url, token, timeout=30)
        self.gap, self.stop, self.times, self.errors = gap, threading.Event(), [], 0

    def run(self) -> None:
        while not self.stop.is_set():
            began = time.perf_counter()
            try:
                self.client.call("GET", "/api/v1/tasks")
                self.times.append(time.perf_counter() - began)
            except (OSError, AssertionError):
                self.errors += 1
            self.stop.wait(self.gap)
        self.client.close()
