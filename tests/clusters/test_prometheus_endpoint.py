"""GET /metrics over real HTTP from a real Daphne, parsed by prometheus_client's own text-format parser."""

from __future__ import annotations

import os
import socket
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cloudpivot.accounts.models import Quota
from clusters.metrics.sampling import sample_all
from tasks.models import Task
from tests import helpers
from tests.builders import submit

SCRAPE_TOKEN = "scrape-9c1e5b7d2f"


@pytest.fixture(scope="module")
def metrics_daphne(django_db_setup, django_db_blocker, tmp_path_factory, server_logs):
    """A Daphne of its own: the scrape token is part of its environment."""
    port = helpers.free_port()
    env = helpers.server_environment(port=port, runs_dir=tmp_path_factory.mktemp("metrics-runs"))
    env["CLOUDPIVOT_METRICS_TOKEN"] = SCRAPE_TOKEN
    log = server_logs / "metrics-daphne.log"
    process = helpers.start_daphne(port=port, env=env, log=log)
    yield SimpleNamespace(url=f"http://127.0.0.1:{port}", log=log)
    helpers.stop_process_group(process)


def get(server, token: str | None = None) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(server.url + "/metrics")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read().decode()


def values(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} from the Prometheus text format, via the official parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_show_what_the_database_holds(transactional_db, world, metrics_daphne):
    Quota.objects.create(project=world.alpha, max_tasks=10, max_vcpu=8)
    for user in (world.bob, world.bob, world.charlie):
        submit(user, resources={"cpu": 2})
    # one task holds quota (state set directly: no cloud is needed to count it)
    Task.objects.filter(pk=Task.objects.filter(owner=world.bob).first().pk).update(state="RUNNING")
    sample_all()  # the local cloud's node figures: this host

    status, headers, body = get(metrics_daphne, SCRAPE_TOKEN)
    assert status == 200, body
    assert headers["Content-Type"].startswith("text/plain")
    figures = values(body)
    local = (("connection", "local"),)
    assert figures[("cloudpivot_tasks", (("connection", "local"), ("state", "PENDING")))] == 2
    assert figures[("cloudpivot_tasks", (("connection", "local"), ("state", "RUNNING")))] == 1
    assert figures[("cloudpivot_tasks", (("connection", "local"), ("state", "FAILED")))] == 0
    assert figures[("cloudpivot_queue_length", local)] == 2
    assert 0 <= figures[("cloudpivot_queue_oldest_age_seconds", local)] < 60
    assert figures[("cloudpivot_active_attempts", local)] == 0
    alpha = (("connection", ""), ("project", "alpha"))
    assert figures[("cloudpivot_quota_used", (*alpha, ("resource", "tasks")))] == 1
    assert figures[("cloudpivot_quota_used", (*alpha, ("resource", "vcpu")))] == 2
    assert figures[("cloudpivot_quota_limit", (*alpha, ("resource", "tasks")))] == 10
    assert figures[("cloudpivot_quota_limit", (*alpha, ("resource", "vcpu")))] == 8
    assert ("cloudpivot_quota_limit", (*alpha, ("resource", "gpus"))) not in figures  # no limit set
    node = (("connection", "local"), ("node", socket.gethostname()))
    assert figures[("cloudpivot_node_cpu_capacity_cores", node)] == os.cpu_count()
    assert figures[("cloudpivot_node_memory_capacity_bytes", node)] > 0
    assert figures[("cloudpivot_cloud_sampling_ok", local)] == 1
    assert ("cloudpivot_jobs_failed", ()) in figures

    # a staff user's API token reads them too
    world.alice.is_staff = True
    world.alice.save(update_fields=["is_staff"])
    status, _, body = get(metrics_daphne, world.tokens["alice"])
    assert status == 200 and values(body)[("cloudpivot_queue_length", local)] == 2


def test_metrics_refuse_without_the_right_credentials(transactional_db, world, metrics_daphne):
    status, headers, body = get(metrics_daphne)
    assert status == 401 and "Bearer" in headers.get("WWW-Authenticate", "")
    assert "cloudpivot_tasks" not in body
    status, _, body = get(metrics_daphne, "not-the-scrape-token")
    assert status == 401 and "cloudpivot_tasks" not in body
    status, _, body = get(metrics_daphne, world.tokens["bob"])  # a user, but not staff
    assert status == 403 and "staff" in body


def test_a_staff_session_may_read_them(world):
    from django.test import Client

    client = Client()
    client.force_login(world.rita)
    assert client.get("/metrics").status_code == 403
    world.rita.is_staff = True
    world.rita.save(update_fields=["is_staff"])
    answer = client.get("/metrics")
    assert answer.status_code == 200
    assert "cloudpivot_queue_length" in {f.name for f in text_string_to_metric_families(answer.content.decode())}
