"""The debug hold from the installed `cloudpivot`: `task describe` shows the held attempt with the kubectl line,
`task release-hold` ends it (the Job goes on the next pass), and a second release is a conflict (exit 87).
The task fails on the loopback kmock Kubernetes, the test playing the kubelet; the CLI talks to the session
Daphne."""

from __future__ import annotations

import pytest

from tasks.services import reconcile_pass
from tests.clusters.debug_hold import failed_and_held

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_describe_shows_the_hold_and_release_hold_ends_it(logged_in, kube, kube_connection, world, api):
    kube_connection.options = kube_connection.options | {"debug_hold_max_minutes": 30}
    kube_connection.save()
    task, name = failed_and_held(kube, api)
    assert task.state == "FAILED", task.state_reason
    pod = kube.pod(name)["metadata"]["name"]

    described = logged_in("task", "describe", str(task.pk))
    assert described.returncode == 0, described.stderr
    assert "Debug hold: attempt 1 is kept until" in described.stdout
    assert f"kubectl exec -n tasks -it {pod} -c debug -- sh" in described.stdout

    released = logged_in("task", "release-hold", str(task.pk))
    assert released.returncode == 0, released.stderr
    assert released.stdout.strip() == "released attempt 1; it is cleaned up now"
    reconcile_pass()
    assert name not in kube.jobs()
    assert "Debug hold" not in logged_in("task", "describe", str(task.pk)).stdout
    assert logged_in("task", "release-hold", str(task.pk)).returncode == 87  # nothing held: a conflict
