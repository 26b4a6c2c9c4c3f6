"""The metrics schedule in the real worker: qcluster runs the synced `metrics-sample` schedule, and
the real Daphne's /metrics shows what it sampled."""

from __future__ import annotations

import urllib.request

import pytest
from django.core.management import call_command
from prometheus_client.parser import text_string_to_metric_families

from clusters.models import MetricSample
from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_qcluster_samples_on_schedule_and_metrics_show_it(world, daphne, server_logs):
    call_command("sync_schedules", verbosity=0)
    world.alice.is_staff = True
    world.alice.save(update_fields=["is_staff"])
    workers = helpers.start_qcluster(env=daphne.env, log=server_logs / "qcluster-metrics.log")
    try:
        helpers.wait_for(
            lambda: MetricSample.objects.filter(metric="cloud_figures_ok", subject_key="local").exists(),
            timeout=120,
            interval=1,
            what=lambda: (
                "a sampling pass by the scheduled job; qcluster log tail: "
                + (server_logs / "qcluster-metrics.log").read_text()[-1500:]
            ),
        )
    finally:
        helpers.stop_process_group(workers)
    assert MetricSample.objects.filter(metric="queue_length", subject_key="local").exists()
    request = urllib.request.Request(
        daphne.url + "/metrics", headers={"Authorization": f"Bearer {world.tokens['alice']}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("cloudpivot_cloud_sampling_ok", (("connection", "local"),))] == 1
