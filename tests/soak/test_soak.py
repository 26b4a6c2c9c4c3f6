"""The soak as a test (issue 16, item 3): tasks on five connections, random cancels and retries through the API,
and a rolling restart of every web process, every qcluster and every host agent during the run; then 0 lost,
0 duplicated (cloud objects and program runs), every log byte-complete. The driver: tests/soak/soak.py.

The suite runs a short one (SOAK_TASKS, default 40, 2 of them on the development OpenStack, 5 % in longer
runs); `make soak` runs the long one (SOAK_TASKS=1000) and prints its figures (docs/benchmarks.md, "Soak").
PostgreSQL + Redis: three web processes and two qclusters. The embedded default (SQLite, no Redis) is one web
process and one qcluster by design (`serve --web-processes` needs the shared channel layer), each still
replaced during the run.
"""

from __future__ import annotations

import json
import os

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from clusters.models import CloudConnection
from tests import helpers
from tests.clusters.kube_cluster import KubeCluster
from tests.plugins.kube import TASK_OPTIONS, TOKEN, kube_connection_to
from tests.soak import soak

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def size(name: str, default: float) -> float:
    return float(os.environ.get(name) or default)


@pytest.fixture
def clusters():
    started = [KubeCluster(), KubeCluster()]
    for cluster in started:
        cluster.configure(token=TOKEN)
    yield dict(zip(soak.KUBE_CLOUDS, started, strict=True))
    for cluster in started:
        cluster.close()


def connect(world, clusters, openstack_cloud, token_file, tmp_path) -> list:
    """The four connections beside the world's `local`: a second local one, two Kubernetes, the OpenStack."""
    made = [
        CloudConnection.objects.create(
            cloud_id="local-b", backend="local", options={"runs_dir": str(tmp_path / "runs-b")}
        ),
        *(
            kube_connection_to(cluster.url, token_file, cloud_id=cloud_id, options=TASK_OPTIONS)
            for cloud_id, cluster in clusters.items()
        ),
        CloudConnection.objects.create(
            cloud_id=soak.OPENSTACK_CLOUD,
            backend="openstack",
            credentials_ref=openstack_cloud.clouds_yaml,
            options={
                "cloud": openstack_cloud.cloud,
                "flavor": "cp.tiny",
                "image": "cp-runner-fake",
                "networks": "none",
                "boot_deadline_seconds": 300,
            },
        ),
    ]
    for made_one in made:
        made_one.projects.add(world.alpha)
    return [world.runs_dir, tmp_path / "runs-b"]


@pytest.mark.timeout(int(size("SOAK_TIMEOUT", 600)))
def test_soak_with_a_rolling_restart_loses_and_duplicates_nothing(
    world, clusters, openstack_cloud, token_file, tmp_path
):
    from tests.plugins.openstack import INSTALLATION
    from tests.plugins.servers import kill_leftover_runners

    scale_out = connection.vendor == "postgresql" and bool(settings.REDIS_URL)
    call_command("sync_schedules", verbosity=0)
    runs_dirs = connect(world, clusters, openstack_cloud, token_file, tmp_path)
    count = int(size("SOAK_TASKS", 40))
    markers = tmp_path / "markers"
    markers.mkdir()
    plans = soak.make_plans(
        count,
        int(size("SOAK_OPENSTACK", max(2, round(count * 0.05)))),
        markers,
        seed=int(size("SOAK_SEED", 16)),
        hold_seconds=size("SOAK_HOLD", 20),
    )
    port = helpers.free_port()
    env = helpers.server_environment(port=port, runs_dir=tmp_path / "runs-default")
    env["CLOUDPIVOT_INSTALLATION_ID"] = INSTALLATION
    fleet = soak.Fleet(env, tmp_path, port, runs_dirs)
    kube_players = [soak.KubeletPlayer(cluster, plans) for cluster in clusters.values()]
    vm_player = soak.VmPlayer(openstack_cloud.conn, f"cloudpivot-{INSTALLATION}", tmp_path / "vms")
    try:
        fleet.start(web=3 if scale_out else 1, workers=2 if scale_out else 1)
        for player in [*kube_players, vm_player]:
            player.start()
        api = soak.Api(fleet.url, world.tokens["bob"])
        outcome = soak.run_soak(
            api=api,
            fleet=fleet,
            plans=plans,
            kube_players=kube_players,
            vm_player=vm_player,
            submitters=2,
            rate=size("SOAK_RATE", 4),
            settle_seconds=size("SOAK_SETTLE", 300),
        )
    finally:
        for player in kube_players:
            player.halt.set()
        vm_player.stop()
        fleet.stop()
        kill_leftover_runners(tmp_path)
    layout = f"{'3 web + 2 qclusters, PostgreSQL + Redis' if scale_out else '1 web + 1 qcluster, SQLite'}"
    print(f"\nsoak ({layout}):\n" + json.dumps(outcome.figures, indent=1))
    assert not outcome.problems, "\n".join(outcome.problems[:40])
    assert len(outcome.figures["restarts"]) >= (5 if scale_out else 2), outcome.figures["restarts"]
