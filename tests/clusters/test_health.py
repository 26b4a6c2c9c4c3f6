"""Connection health: the checks run against real servers on loopback and their verdict stored in words."""

from __future__ import annotations

import socket
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from cloudpivot.schedules import SCHEDULES
from clusters.health import connections_check, without_secrets
from clusters.jobs import check_health
from clusters.models import CloudConnection
from tests import helpers
from tests.plugins.kube import TOKEN, kube_connection_to

pytestmark = pytest.mark.django_db


def stored(connection: CloudConnection) -> CloudConnection:
    return CloudConnection.objects.get(pk=connection.pk)


def test_a_kubernetes_cluster_that_answers_is_ok_with_what_was_checked(kube, kube_connection, api):
    report = connections_check([kube_connection])["k3s-lab"]
    assert report.ok
    row = stored(kube_connection)
    assert row.health_status == "ok" and row.health_checked_at is not None
    assert "Kubernetes v1." in row.health_message and "everything CloudPivot needs is allowed" in row.health_message
    shown = api("bob").get("/api/v1/clouds/k3s-lab").json()
    assert shown["health_status"] == "ok" and shown["health_message"] == row.health_message
    assert [c["health_status"] for c in api("bob").get("/api/v1/clouds").json() if c["cloud_id"] == "k3s-lab"] == ["ok"]


def test_a_closed_port_is_failing_in_words(world, token_file):
    endpoint = f"http://127.0.0.1:{helpers.free_port()}"
    closed = kube_connection_to(endpoint, token_file, world.alpha, cloud_id="k3s-closed")
    assert not connections_check([closed])["k3s-closed"].ok
    row = stored(closed)
    assert row.health_status == "failing" and row.health_checked_at is not None
    assert f"cannot use this cloud: cannot reach the Kubernetes API at {endpoint}" in row.health_message
    assert TOKEN not in row.health_message and str(token_file) not in row.health_message


def test_missing_permissions_are_failing_and_named(kube, kube_connection):
    kube.configure(
        permissions={("list", "batch", "jobs", ""), ("create", "batch", "jobs", ""), ("list", "", "pods", "")}
    )
    connections_check([kube_connection])
    row = stored(kube_connection)
    assert row.health_status == "failing"
    assert row.health_message.startswith("missing 4 permission(s) CloudPivot needs: get jobs; watch jobs")


def test_rejected_credentials_are_failing_without_the_token(kube, kube_connection):
    kube.configure(token="rotated")
    connections_check([kube_connection])
    row = stored(kube_connection)
    assert row.health_status == "failing" and "401 Unauthorized" in row.health_message
    assert TOKEN not in row.health_message


def test_the_local_cloud_is_ok(world):
    connections_check([world.local])
    row = stored(world.local)
    assert row.health_status == "ok" and row.health_message.startswith("runs tasks on this host as ")


def test_a_cloud_that_hangs_is_failing_at_the_deadline_and_does_not_hold_the_others(
    world, token_file, kube, kube_connection
):
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        hung = kube_connection_to(
            f"http://127.0.0.1:{silent.getsockname()[1]}", token_file, world.alpha, cloud_id="k3s-hung"
        )
        started = time.monotonic()
        reports = connections_check([hung, world.local, kube_connection], timeout=2)
        elapsed = time.monotonic() - started
    assert elapsed < 5, elapsed
    assert reports["local"].ok and reports["k3s-lab"].ok and not reports["k3s-hung"].ok
    assert stored(hung).health_message == "the cloud did not answer the checks within 2 s"
    assert stored(world.local).health_status == stored(kube_connection).health_status == "ok"


def test_the_scheduled_job_checks_every_connection(world, token_file):
    closed = kube_connection_to(
        f"http://127.0.0.1:{helpers.free_port()}", token_file, world.alpha, cloud_id="k3s-closed"
    )
    entry = next(e for e in SCHEDULES if e["func"] == "clusters.jobs.check_health")
    assert entry["schedule_type"] == "I" and entry["minutes"] <= 10
    assert check_health() == "checked 2, failing: k3s-closed"
    assert stored(world.local).health_status == "ok" and stored(closed).health_status == "failing"


def test_secrets_are_cut_out_of_the_words_and_long_words_are_cut_short():
    text = without_secrets("401: header Authorization: Bearer sk-12345 rejected; password=hunter2, token: 'abc'")
    assert "sk-12345" not in text and "hunter2" not in text and "abc" not in text
    assert "Bearer [hidden]" in text and "password=[hidden]" in text
    assert len(without_secrets("x" * 5000)) == 1000


def test_the_admin_action_tests_the_chosen_connections_and_says_what_it_found(world, token_file):
    closed = kube_connection_to(
        f"http://127.0.0.1:{helpers.free_port()}", token_file, world.alpha, cloud_id="k3s-closed"
    )
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "pw-root"))
    response = client.post(
        "/admin/clusters/cloudconnection/",
        {"action": "test_connection", "_selected_action": [world.local.pk, closed.pk]},
        follow=True,
    )
    said = [str(m) for m in response.context["messages"]]
    assert any(m.startswith("local: OK: runs tasks on this host") for m in said), said
    assert any(m.startswith("k3s-closed: failing: ") for m in said), said
    assert stored(world.local).health_status == "ok" and stored(closed).health_status == "failing"
    listing = client.get("/admin/clusters/cloudconnection/").content.decode()
    assert "runs tasks on this host" in listing  # the message is a column of the list


def test_check_cloud_stores_the_verdict_it_prints(world):
    from django.core.management import call_command

    call_command("check_cloud", "local", stdout=open("/dev/null", "w"))
    assert stored(world.local).health_status == "ok"
