"""The orphan reconciler on a Kubernetes connection: Jobs CloudPivot labelled, compared with its attempts.

The real `kubernetes` client lists and deletes through the loopback API server (kube_fixture.py).
"""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from django_q.conf import Conf

from cloudpivot.accounts.models import AuditEntry
from clusters.backends.kubernetes import LABEL_INSTALLATION
from orphans.models import OrphanFinding
from orphans.scan import orphans_scan
from tasks.models import Attempt
from tasks.services import reconcile_pass
from tasks.services.submission import task_submit
from tests.clusters.kube_api import JOBS
from tests.plugins.kube import job, ours

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def inline_jobs(monkeypatch):
    monkeypatch.setattr(Conf, "SYNC", True)


def findings(connection) -> dict[str, OrphanFinding]:
    orphans_scan(connections=[connection])
    return {f.ref: f for f in OrphanFinding.objects.filter(connection=connection).exclude(state="resolved")}


def superuser_client() -> Client:
    root = get_user_model().objects.create_superuser("root", "root@example.org", "pw-root")
    client = Client()
    client.force_login(root)
    return client


def test_a_labelled_job_with_no_attempt_is_an_orphan_and_other_installations_jobs_never_appear(
    kube, kube_connection, world, inline_jobs
):
    kube.put(JOBS, "tasks", job("cp-lost-1", ours("cp-lost-1")))
    kube.put(JOBS, "tasks", job("cp-theirs-1", {**ours("cp-theirs-1"), LABEL_INSTALLATION: "another-install"}))
    kube.put(JOBS, "tasks", job("handmade", {"app": "handmade"}))
    task, _ = task_submit(
        user=world.bob, document={"cloud": "k3s-lab", "image": "python:3.12-slim", "command": ["true"]}
    )
    reconcile_pass()  # the pass the submission's doorbell wakes: admitted and started
    attempt = task.attempts.get()
    assert attempt.external_name in kube.jobs()  # the running attempt's own Job

    found = findings(kube_connection)

    assert set(found) == {"cp-lost-1"}
    lost = found["cp-lost-1"]
    assert (lost.kind, lost.category, lost.state, lost.protected) == ("job", "orphan", "open", False)
    assert "cp-lost-1, which CloudPivot has no record of" in lost.reason
    assert lost.uid == kube.jobs()["cp-lost-1"]["metadata"]["uid"]

    # The attempt closes and its cleanup is recorded as done, yet its Job stays: stale.
    Attempt.objects.filter(pk=attempt.pk).update(closed_at=timezone.now(), cleanup_state="done")
    found = findings(kube_connection)
    assert found[attempt.external_name].category == "stale"
    assert "its Job is still in the cloud" in found[attempt.external_name].reason


def test_deleting_an_orphan_job_from_the_admin_removes_it_and_is_audited(kube, kube_connection, world):
    kube.put(JOBS, "tasks", job("cp-lost-2", ours("cp-lost-2")))
    kube.put(JOBS, "tasks", job("cp-kept-2", ours("cp-kept-2", **{"cloudpivot.io/protected": "true"})))
    found = findings(kube_connection)
    assert found["cp-kept-2"].protected_reason == "labelled cloudpivot.io/protected"
    client = superuser_client()

    url = "/admin/orphans/orphanfinding/"
    pks = [found["cp-lost-2"].pk, found["cp-kept-2"].pk]
    response = client.post(url, {"action": "delete_in_cloud", "_selected_action": pks}, follow=True)

    assert response.status_code == 200
    text = response.content.decode().lower()
    assert "asked the k3s-lab cloud to delete job cp-lost-2" in text
    assert "job cp-kept-2 is protected: labelled cloudpivot.io/protected" in text
    assert set(kube.jobs()) == {"cp-kept-2"}
    entries = {e.object_ref: e for e in AuditEntry.objects.filter(action="resources:orphan-delete")}
    assert entries["k3s-lab/job/cp-lost-2"].outcome == "ok"
    assert entries["k3s-lab/job/cp-kept-2"].outcome == "refused"
    assert entries["k3s-lab/job/cp-lost-2"].actor_name == "root"
    assert OrphanFinding.objects.get(ref="cp-lost-2").state == "deleted"
    assert set(findings(kube_connection)) == {"cp-kept-2"}  # the next scan finds it gone: resolved
    assert OrphanFinding.objects.get(ref="cp-lost-2").state == "resolved"


def test_a_delete_rechecks_the_label_and_the_uid_at_action_time(kube, kube_connection, world):
    kube.put(JOBS, "tasks", job("cp-lost-3", ours("cp-lost-3")))
    finding = findings(kube_connection)["cp-lost-3"]
    # Meanwhile the Job is replaced by one of the same name that is not ours.
    kube.call(lambda: kube.api.system("DELETE", "/apis/batch/v1/namespaces/tasks/jobs/cp-lost-3"))
    kube.put(JOBS, "tasks", job("cp-lost-3", {"app": "someone-else"}))
    client = superuser_client()

    response = client.post(
        "/admin/orphans/orphanfinding/", {"action": "delete_in_cloud", "_selected_action": [finding.pk]}, follow=True
    )

    assert "left alone" in response.content.decode()
    assert "cp-lost-3" in kube.jobs()


def test_the_orphans_scan_command_prints_the_report_and_refuses_unknown_clouds(kube, kube_connection, world):
    kube.put(JOBS, "tasks", job("cp-lost-4", ours("cp-lost-4")))
    out = io.StringIO()

    call_command("orphans_scan", "k3s-lab", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0] == "k3s-lab: 1 found, 0 resolved"
    assert lines[1].startswith("k3s-lab orphan job cp-lost-4 cp-lost-4 (open): made for attempt cp-lost-4")
    with pytest.raises(CommandError, match="no cloud connection nowhere"):
        call_command("orphans_scan", "nowhere")


def test_a_delete_the_cluster_refuses_marks_the_finding_needs_cleanup_with_the_error(kube, kube_connection, world):
    kube.put(JOBS, "tasks", job("cp-lost-5", ours("cp-lost-5")))
    finding = findings(kube_connection)["cp-lost-5"]
    kube.configure(permissions={("list", "batch", "jobs", ""), ("get", "batch", "jobs", "")})  # no delete
    client = superuser_client()

    response = client.post(
        "/admin/orphans/orphanfinding/", {"action": "delete_in_cloud", "_selected_action": [finding.pk]}, follow=True
    )

    assert "deleting job cp-lost-5 failed" in response.content.decode().lower()
    finding.refresh_from_db()
    assert finding.state == "needs_cleanup"
    assert 'cannot delete resource "jobs"' in finding.error
    assert "cp-lost-5" in kube.jobs()
    entry = AuditEntry.objects.get(action="resources:orphan-delete")
    assert entry.outcome == "error" and 'cannot delete resource "jobs"' in entry.details["error"]
    # Still listed by the next scan, and still needing cleanup.
    assert findings(kube_connection)["cp-lost-5"].state == "needs_cleanup"
