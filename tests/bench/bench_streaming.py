"""Streaming logs at the issue's scale (issue 11): `make bench-streaming` with DATABASE_URL and REDIS_URL set.

Tasks on the `local` cloud (run by the real host agent, reporting to a real Daphne; the reconcile loop runs
in a thread as a worker's ticker would) each print timestamped lines at a steady rate
(tests/bench/streaming_load.py). Quick by default (20 tasks × 20 lines/s × 15 s); the issue's figures with
`BENCH_SHORT=0` (100 tasks × 20 lines/s × 60 s) or BENCH_STREAM_TASKS / _RATE / _SECONDS.
Measured:
- line printed → readable through the API: followers (BENCH_STREAM_FOLLOWERS, default 5) each poll one
  task's GET /api/v1/tasks/{id}/logs?offset= every 0.2 s on a keep-alive connection; p50/p95;
- line printed → shown in an open browser page: headless Chromium (Playwright), BENCH_STREAM_PAGES (default
  3) task pages with the live log over the websocket; arrival times read in the page; p50/p95;
- lines lost or duplicated (must be 0): every task's whole stored log read back through the API at the end,
  each line number once; and what the followers and the pages saw twice;
- CPU per line printed, by kind of process (tests/bench/served.py `tree_cpu`): the web server, the host agent
  and its supervisors, the programs themselves, and this process (followers, reconcile loop, list client);
- the task list API while the tasks stream, with BENCH_STREAM_LIST_TASKS tasks in the database (100,000 with
  BENCH_SHORT=0, none by default; bulk-inserted as bench_task_list.py does): p50/p95 of GET /api/v1/tasks
  (default page, one project's member) asked every BENCH_STREAM_LIST_GAP seconds (0.25) over one connection.
Figures, not assertions: this machine is shared and noisy.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tasks.models import LogChunk, Task
from tasks.services.submission import task_submit
from tests import helpers
from tests.bench import listing, served, streaming_load
from tests.bench.served import KeepAliveClient, cpu_since, tree_cpu
from tests.builders import hello_spec

pytestmark = pytest.mark.django_db(transaction=True)
POLL_SECONDS = 0.2
FINISHED = ("SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT", "UNKNOWN")

RECORDER = """() => {
  window.__arrivals = [];
  window.__shown = new Map();
  const log = document.querySelector('#task-log');
  const take = () => {
    const now = Date.now() / 1000;
    const counts = new Map();
    for (const line of log.textContent.split('\\n')) {
      const parts = line.split(' ');
      if (parts.length < 3 || isNaN(parseFloat(parts[0]))) continue;
      const key = parts[1] + ' ' + parts[2];
      counts.set(key, (counts.get(key) || 0) + 1);
      if (!window.__shown.has(key)) window.__arrivals.push(now - parseFloat(parts[0]));
    }
    window.__shown = counts;
  };
  take();
  window.__arrivals = [];  // what the page showed before we watched is not a live line
  new MutationObserver(take).observe(log, {childList: true, subtree: true, characterData: true});
}"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class Follower(threading.Thread):
    """One client reading one task's log as it grows, as `cloudpivot task logs -f` does."""

    def __init__(self, url: str, token: str, task_id: str) -> None:
        super().__init__(daemon=True)
        self.client = KeepAliveClient(url, token, timeout=30)
        self.task_id, self.stop, self.latencies, self.duplicates = task_id, threading.Event(), [], 0
        self.seen: set[int] = set()

    def run(self) -> None:
        offset, pending = 0, b""
        while not self.stop.is_set():
            try:
                page = self.client.call("GET", f"/api/v1/tasks/{self.task_id}/logs?offset={offset}")
            except (OSError, AssertionError):  # a slow answer under load: ask again, the offset makes it lossless
                continue
            now = time.time()
            pending += page["data"].encode()
            offset = page["next_offset"]
            *lines, pending = pending.split(b"\n")
            for line in lines:
                parsed = streaming_load.parse(line)
                if parsed is None:
                    continue
                if parsed[2] in self.seen:
                    self.duplicates += 1
                else:
                    self.seen.add(parsed[2])
                    self.latencies.append(now - parsed[0])
            self.stop.wait(POLL_SECONDS)
        self.client.close()


def ingest_latencies(task_ids: list[Any]) -> list[float]:
    """For every line stored: from its printing to the moment the server built its log chunk (created_at, a moment
    before the batch commits). What is left of a reader's latency is the reading side's."""
    latencies = []
    for created, data in LogChunk.objects.filter(task_id__in=task_ids).values_list("created_at", "data").iterator():
        stored = created.timestamp()
        for line in bytes(data).split(b"\n"):
            if parsed := streaming_load.parse(line):
                latencies.append(stored - parsed[0])
    return latencies


def stored_lines(url: str, token: str, task_id: str) -> list[int]:
    """Every line number in the task's stored log, in order, read through the API from offset 0."""
    client = KeepAliveClient(url, token)
    data, offset = b"", 0
    try:
        while True:
            page = client.call("GET", f"/api/v1/tasks/{task_id}/logs?offset={offset}")
            data += page["data"].encode()
            if page["next_offset"] == offset:
                break
            offset = page["next_offset"]
    finally:
        client.close()
    return [parsed[2] for line in data.split(b"\n") if (parsed := streaming_load.parse(line))]


def open_pages(request: Any, tasks: list[Task], count: int) -> list[Any]:
    if count <= 0:
        return []
    if not Path(helpers.CHROMIUM).exists():
        print(f"  browser: not measured: {helpers.CHROMIUM} is missing")
        return []
    login = request.getfixturevalue("open_page")
    pages = []
    for task in tasks[:count]:
        page = login("bob")
        page.goto(f"/tasks/{task.pk}/")
        page.evaluate(RECORDER)
        pages.append(page)
    return pages


def test_streaming_logs(request, worker, world):
    knobs = streaming_load.knobs()
    count, rate, seconds = int(knobs["tasks"]), knobs["rate"], knobs["seconds"]
    expected = int(rate * seconds)
    followers_n = int(os.environ.get("BENCH_STREAM_FOLLOWERS", str(min(count, 5))))
    pages_n = int(os.environ.get("BENCH_STREAM_PAGES", "3"))
    list_total = int(os.environ.get("BENCH_STREAM_LIST_TASKS", "100000" if count >= 100 else "0"))
    seeded = listing.seed(world, list_total, world.runs_dir.parent / "seeded-runs") if list_total else None
    load_start = os.getloadavg()
    # Every program waits for one common start, so the pages are open and the followers ready before the first line.
    lead = float(os.environ.get("BENCH_STREAM_LEAD", str(15 + 0.2 * count + 8 * pages_n)))
    start_at = time.time() + lead
    tasks = [
        task_submit(
            user=world.bob,
            document=hello_spec(command=streaming_load.command(index=i, rate=rate, seconds=seconds, start_at=start_at)),
        )[0]
        for i in range(count)
    ]
    token = world.tokens["bob"]
    followers = [Follower(worker.url, token, str(task.pk)) for task in tasks[:followers_n]]
    for follower in followers:
        follower.start()
    pages = open_pages(request, tasks, pages_n)
    if time.time() > start_at:
        print(f"  (the pages took longer than the {lead:.0f} s lead: raise BENCH_STREAM_LEAD)")
    ids = [task.pk for task in tasks]
    lister = None
    if seeded:
        lister = listing.Lister(worker.url, token, float(os.environ.get("BENCH_STREAM_LIST_GAP", "0.25")))
        lister.start()
    # CPU is read over the steady state, while every program prints (each process is then alive and counted as
    # itself; a program that ended is in its supervisor's cutime and would count as the agent's).
    window = (start_at + 1, start_at + max(2.0, seconds - 1))
    time.sleep(max(0.0, window[0] - time.time()))
    cpu_roots = {"server": [worker.process.pid, *_agent_pids(world.runs_dir)], "bench": [os.getpid()]}
    cpu_before = {who: tree_cpu(roots) for who, roots in cpu_roots.items()}
    time.sleep(max(0.0, window[1] - time.time()))
    cpu = {who: cpu_since(cpu_before[who], tree_cpu(roots)) for who, roots in cpu_roots.items()}
    helpers.wait_for(
        lambda: Task.objects.filter(pk__in=ids, state__in=FINISHED).count() == count,
        timeout=seconds + 300,
        interval=1,
        what=f"all {count} streaming tasks to finish",
    )
    elapsed = time.time() - start_at
    time.sleep(2 * POLL_SECONDS + 1)  # the followers' and pages' last reads
    if lister is not None:
        lister.stop.set()
        lister.join(timeout=30)
    for follower in followers:
        follower.stop.set()
    for follower in followers:
        follower.join(timeout=30)
    page_arrivals, page_duplicates = [], 0
    for page in pages:
        page_arrivals += page.evaluate("window.__arrivals")
        page_duplicates += page.evaluate("[...window.__shown.values()].filter(n => n > 1).length")
    lost = duplicated = 0
    for task in tasks:
        numbers = stored_lines(worker.url, token, str(task.pk))
        lost += len(set(range(expected)) - set(numbers))
        duplicated += len(numbers) - len(set(numbers))
    stored_after = ingest_latencies(ids)
    states: dict[str, int] = {}
    for state in Task.objects.filter(pk__in=ids).values_list("state", flat=True):
        states[state] = states.get(state, 0) + 1
    api = [latency for follower in followers for latency in follower.latencies]
    print(f"\n=== Streaming: {count} tasks × {rate:g} lines/s × {seconds:g} s on `local` ({expected} lines each)")
    print(f"  database: {_vendor()}; load average {load_start} → {os.getloadavg()}")
    print(f"  all finished {elapsed:.0f} s after the programs began printing ({seconds:g} s of output); {states}")
    print(
        f"  line printed → readable through the API ({len(followers)} followers polling every {POLL_SECONDS} s): "
        f"p50 {percentile(api, 0.5) * 1000:.0f} ms, p95 {percentile(api, 0.95) * 1000:.0f} ms over {len(api)} lines"
    )
    if pages:
        print(
            f"  line printed → shown in the browser page ({len(pages)} pages, websocket): "
            f"p50 {percentile(page_arrivals, 0.5) * 1000:.0f} ms, p95 {percentile(page_arrivals, 0.95) * 1000:.0f} ms "
            f"over {len(page_arrivals)} lines; lines shown twice: {page_duplicates}"
        )
    print(
        f"  (of which line printed → stored by the server: p50 {percentile(stored_after, 0.5) * 1000:.0f} ms, "
        f"p95 {percentile(stored_after, 0.95) * 1000:.0f} ms: the host agent's batching and its sync request)"
    )
    print(f"  stored logs: {lost} lines lost, {duplicated} duplicated (of {expected * count})")
    print(f"  followers saw {sum(f.duplicates for f in followers)} lines twice")
    if lister is not None:
        print(
            f"  task list API with {list_total:,} tasks seeded, while streaming (GET /api/v1/tasks, one project): "
            f"p50 {percentile(lister.times, 0.5) * 1000:.0f} ms, p95 {percentile(lister.times, 0.95) * 1000:.0f} ms "
            f"over {len(lister.times)} requests ({lister.errors} failed)"
        )
    print_cpu(cpu, lines=int(rate * (window[1] - window[0]) * count), seconds=window[1] - window[0])
    print("  targets (issue 11): API p95 < 1 s, browser p95 < 1 s, 0 lost, 0 duplicated; list p95 < 100 ms")


def print_cpu(cpu: dict[str, dict[str, float]], *, lines: int, seconds: float) -> None:
    """CPU while every program printed: µs per line printed and share of one core, by kind of process."""
    print(f"  CPU while every program printed ({seconds:.0f} s), per line printed and as a share of one core:")
    for who, kinds in cpu.items():
        for kind, used in sorted(kinds.items(), key=lambda item: -item[1]):
            if used > 0 and not (who == "bench" and kind in served.WEB_KINDS):  # the web server is counted once
                share = 100 * used / seconds
                print(f"    {who:6s} {kind:28s} {used * 1e6 / lines:7.0f} µs/line  {share:5.1f} % of a core")
    server = sum(used for kind, used in cpu["server"].items() if kind != "programs and other")
    print(f"    CloudPivot (web + agent + supervisors): {server * 1e6 / lines:.0f} µs per line")


def _agent_pids(runs_dir: Path) -> list[int]:
    """The host agent serving the world's runs directory (detached: not below this process)."""
    lock = runs_dir / "agent.lock"
    text = lock.read_text().strip() if lock.exists() else ""
    return [int(text)] if text.isdigit() else []


def _vendor() -> str:
    from django.db import connection

    return connection.vendor
