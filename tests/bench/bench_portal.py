"""Portal benchmark (issue 5): `make bench`.

Prints, in one run:
1. line printed by a running task → shown in the browser's task page (p50/p95), through the real
   Runner, Daphne, the websocket and the page's JavaScript in headless Chromium;
2. server-side time (p50/p95) of the tasks list page and of the list API with 10,000 and
   100,000 tasks in the database (Django's test client, in process: no network in the figure);
3. server-side time of a task's page with a 1 KiB log beside one with a 50 MiB log (the page
   sends the last 256 KiB only, so the two should be close).
"""

from __future__ import annotations

import statistics
import time
import uuid

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tasks.models import Task
from tasks.services.submission import task_submit
from tests.builders import hello_spec

pytestmark = [pytest.mark.django_db(transaction=True)]

PROGRAM = (
    "import time\nfor i in range({n}):\n"
    "    print('%.6f line %d' % (time.time(), i), flush=True)\n    time.sleep({pause})\n"
)
RECORDER = """() => {
  window.__arrivals = [];
  const log = document.querySelector('#task-log');
  const seen = new Set();
  new MutationObserver(() => {
    const now = Date.now() / 1000;
    for (const line of log.textContent.split('\\n')) {
      const stamp = parseFloat(line);
      if (line && !seen.has(line) && !isNaN(stamp)) { seen.add(line); window.__arrivals.push(now - stamp); }
    }
  }).observe(log, {childList: true, subtree: true, characterData: true});
}"""


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def test_line_printed_to_browser_latency(open_page, worker, world):
    page = open_page("bob")
    task, _ = task_submit(
        user=world.bob, document=hello_spec(command=["python3", "-c", PROGRAM.format(n=60, pause=0.2)])
    )
    page.goto(f"/tasks/{task.pk}/")
    page.evaluate(RECORDER)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and page.evaluate("window.__arrivals.length") < 55:
        time.sleep(0.5)
    arrivals = page.evaluate("window.__arrivals")
    p50, p95 = percentiles(arrivals)
    print(
        f"\n=== Portal: line printed → shown in the browser page: p50 {p50 * 1000:.0f} ms, "
        f"p95 {p95 * 1000:.0f} ms over {len(arrivals)} lines (Runner → Daphne → websocket → page)"
    )


def seed_tasks(world, total: int) -> None:
    template, _ = task_submit(user=world.bob, document=hello_spec())
    have = Task.objects.count()
    batch = []
    for i in range(have, total):
        batch.append(
            Task(
                id=uuid.uuid4(),
                project=world.alpha,
                owner=world.bob,
                connection=world.local,
                backend="local",
                name=f"seeded {i}",
                spec=template.spec,
                spec_sha256=template.spec_sha256,
                normalized=template.normalized,
                state="SUCCEEDED" if i % 3 else "FAILED",
            )
        )
        if len(batch) == 5000:
            Task.objects.bulk_create(batch)
            batch = []
    Task.objects.bulk_create(batch)


def timed(fetch, runs: int = 20) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        response = fetch()
        times.append(time.perf_counter() - started)
        assert response.status_code == 200
    return percentiles(times)


def test_list_page_and_api_time_with_many_tasks(world):
    page_client = Client()
    page_client.force_login(world.bob)
    api_client = APIClient()
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.tokens['bob']}")
    print("\n=== Tasks list, server-side time (in-process client)")
    for total in (10_000, 100_000):
        seed_tasks(world, total)
        rows = [
            ("page /tasks/", lambda: page_client.get("/tasks/")),
            ("page /tasks/?state=FAILED", lambda: page_client.get("/tasks/?state=FAILED")),
            ("API /api/v1/tasks", lambda: api_client.get("/api/v1/tasks")),
            ("API /api/v1/tasks?state=FAILED", lambda: api_client.get("/api/v1/tasks?state=FAILED")),
        ]
        for name, fetch in rows:
            fetch()  # warm
            p50, p95 = timed(fetch)
            print(f"{total:>7} tasks  {name:<34} p50 {p50 * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms")


def test_task_page_time_with_a_tiny_and_a_50_mib_log(world, make):
    client = Client()
    client.force_login(world.bob)
    tiny, tiny_attempt = make.running(world.bob, name="tiny log")
    make.write_log(tiny_attempt, b"hello\n" * 170)
    big, big_attempt = make.running(world.bob, name="big log")
    block = b"".join(b"%08d the quick brown fox jumps over the lazy dog\n" % i for i in range(20_000))  # ~1 MiB
    for _ in range(50):
        make.write_log(big_attempt, block)
    print("\n=== Task page, server-side time (in-process client), side by side")
    figures = {}
    for name, task in (("1 KiB log", tiny), ("50 MiB log", big)):
        url = f"/tasks/{task.pk}/"
        client.get(url)  # warm
        figures[name] = timed(lambda url=url: client.get(url))
        p50, p95 = figures[name]
        print(f"  {name:<12} p50 {p50 * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms")
    print(f"  ratio 50 MiB / 1 KiB (p50): {figures['50 MiB log'][0] / figures['1 KiB log'][0]:.2f}")
