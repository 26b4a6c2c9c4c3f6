"""The orphan reconciler against the real OpenStack (Keystone, Glance, Nova with the fake virt driver).

Servers and images are made directly through the SDK, as CloudPivot would have made them before losing
their rows; the report, the admin's delete and adopt then go through the real SDK and real HTTP.
"""

from __future__ import annotations

import html
import time
from types import SimpleNamespace

import openstack.exceptions as os_exc
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from keystoneauth1 import exceptions as ks_exc

from cloudpivot.accounts.models import AuditEntry
from clusters.backends.openstack import installation_tag
from clusters.models import CloudConnection
from orphans.models import OrphanFinding
from orphans.scan import orphans_scan
from resources.backends.openstack import instance_tag
from resources.models import Instance
from tests import helpers
from tests.builders import instance_row, snapshot_row
from tests.plugins.openstack import INSTALLATION, os_dev_connection

pytestmark = [pytest.mark.e2e, pytest.mark.django_db]
CHANGELIST = "/admin/orphans/orphanfinding/"


@pytest.fixture
def cloud(world, openstack_cloud, settings):
    """An `os-dev` connection (project alpha) and makers of servers/images that are all removed at the end."""
    connection = os_dev_connection(openstack_cloud, settings, world.alpha)
    conn = openstack_cloud.conn
    flavor = conn.compute.find_flavor("cp.tiny", ignore_missing=False)
    image = conn.image.find_image("cp-runner-fake", ignore_missing=False)
    made: dict[str, list[str]] = {"servers": [], "images": []}

    def server(name: str, tags: list[str], metadata: dict[str, str] | None = None):
        created = retried(
            conn.compute.create_server,
            name=name,
            flavor_id=flavor.id,
            image_id=image.id,
            networks="none",
            tags=tags,
            metadata=metadata or {},
        )
        made["servers"].append(created.id)
        return active(conn, created.id)

    def snapshot_image(server_id: str, name: str, installation: str = INSTALLATION) -> str:
        made_image = conn.compute.create_server_image(
            server_id, name=name, metadata={"cloudpivot_installation": installation}, wait=False
        )
        image_id = made_image if isinstance(made_image, str) else made_image.id
        made["images"].append(image_id)
        active(conn, server_id)  # the server's image_snapshot task has cleared
        return image_id

    def lone_image(name: str, installation: str = INSTALLATION) -> str:
        created = conn.image.create_image(
            name=name, disk_format="raw", container_format="bare", meta={"cloudpivot_installation": installation}
        )
        made["images"].append(created.id)
        return created.id

    yield SimpleNamespace(
        connection=connection, conn=conn, world=world, server=server, snapshot_image=snapshot_image, image=lone_image
    )
    for image_id in made["images"]:
        retried(conn.image.delete_image, image_id, ignore_missing=True)
    for server_id in made["servers"]:
        try:
            retried(conn.compute.unlock_server, server_id)
        except os_exc.SDKException:
            pass  # already gone
        retried(conn.compute.delete_server, server_id, ignore_missing=True)
    for server_id in made["servers"]:  # Nova deletes in the background: the next test must not list them
        gone(conn, server_id)


def retried(call, *args, **kwargs):
    """An SDK call of the test's own, asked again when the shared dev Nova drops a kept-alive connection."""
    for _ in range(4):
        try:
            return call(*args, **kwargs)
        except ks_exc.ConnectFailure:
            time.sleep(0.5)
    return call(*args, **kwargs)


def active(conn, server_id: str):
    def settled():
        try:
            server = conn.compute.get_server(server_id)
        except ks_exc.ConnectFailure:  # the shared dev Nova sometimes drops a kept-alive connection: ask again
            return None
        return server if server.status == "ACTIVE" and not server.task_state else None

    return helpers.wait_for(settled, timeout=60, interval=0.3, what=f"server {server_id} ACTIVE")


def gone(conn, server_id: str) -> None:
    def absent():
        try:
            conn.compute.get_server(server_id)
        except os_exc.NotFoundException:
            return True
        except ks_exc.ConnectFailure:
            return False
        return False

    helpers.wait_for(absent, timeout=60, interval=0.3, what=f"server {server_id} deleted")


def ours() -> dict[str, str]:
    return {"cloudpivot_installation": INSTALLATION}


def report(cloud) -> dict[str, OrphanFinding]:
    orphans_scan(connections=[cloud.connection])
    return {
        f.ref: f
        for f in OrphanFinding.objects.filter(connection=cloud.connection).exclude(state__in=["resolved", "adopted"])
    }


def superuser_client() -> Client:
    root = get_user_model().objects.create_superuser("root", "root@example.org", "pw-root")
    client = Client()
    client.force_login(root)
    return client


def act(client: Client, action: str, findings: list[OrphanFinding], **extra) -> str:
    data = {"action": action, "_selected_action": [f.pk for f in findings], **extra}
    response = client.post(CHANGELIST, data, follow=True)
    assert response.status_code == 200
    return html.unescape(response.content.decode()).lower()


def known_instance(cloud, server, *, status: str = "Running", name: str = "known") -> Instance:
    return instance_row(
        connection=cloud.connection,
        project=cloud.world.alpha,
        owner=cloud.world.bob,
        name=name,
        status=status,
        server_id=server.id if server else "",
        deleted_at=timezone.now() if status == "Deleted" else None,
    )


# ---------------------------------------------------------------------------- the report
def test_a_tagged_server_unknown_to_cloudpivot_is_an_orphan_and_untagged_or_foreign_ones_never_appear(cloud):
    lost = cloud.server("lost-server", [installation_tag()], ours())
    foreign = cloud.server("foreign-server", ["cloudpivot-test-someoneelse"], {"cloudpivot_installation": "x"})
    untagged = cloud.server("untagged-server", [])
    copied_tag = cloud.server("copied-tag", [installation_tag()], {"cloudpivot_installation": "another-one"})
    known = cloud.server("known-server", [installation_tag()], ours())
    deleted = cloud.server("deleted-server", [installation_tag()], ours())
    known_instance(cloud, known)
    known_instance(cloud, deleted, status="Deleted", name="gone-instance")
    expecting = known_instance(cloud, None, name="expecting")
    Instance.objects.filter(pk=expecting.pk).update(server_id="00000000-0000-4000-8000-000000000000")

    found = report(cloud)

    assert lost.id in found
    assert (found[lost.id].category, found[lost.id].kind, found[lost.id].name) == ("orphan", "server", "lost-server")
    assert not found[lost.id].protected
    for other in (foreign, untagged, copied_tag, known):
        assert other.id not in found
    assert found[deleted.id].category == "stale"
    assert "gone-instance" in found[deleted.id].reason
    missing = found["00000000-0000-4000-8000-000000000000"]
    assert (missing.category, missing.kind, missing.name) == ("missing", "server", "expecting")


def test_snapshot_images_are_compared_with_snapshots_and_a_snapshots_source_server_is_protected(cloud):
    source = cloud.server("snapshot-source", [installation_tag()], ours())
    orphan_image = cloud.snapshot_image(source.id, "lost-snapshot")
    foreign_image = cloud.image("foreign-image", installation="someone-else")
    stale_image = cloud.image("stale-image")
    snapshot_row(
        connection=cloud.connection,
        project=cloud.world.alpha,
        owner=cloud.world.bob,
        name="deleted-snap",
        image_id=stale_image,
        status="deleted",
    )

    snapshot_row(
        connection=cloud.connection,
        project=cloud.world.alpha,
        owner=cloud.world.bob,
        name="vanished-snap",
        image_id="00000000-0000-4000-8000-0000000000ee",
    )

    found = report(cloud)

    assert found["00000000-0000-4000-8000-0000000000ee"].category == "missing"
    assert found["00000000-0000-4000-8000-0000000000ee"].reason.startswith("snapshot vanished-snap")
    assert found[orphan_image].category == "orphan"
    assert found[orphan_image].kind == "image"
    assert foreign_image not in found
    assert found[stale_image].category == "stale"
    assert found[source.id].category == "orphan"
    assert found[source.id].protected_reason == "the source of image lost-snapshot"
    summary = orphans_scan(connections=[cloud.connection])
    assert "no block-storage" not in summary.lower()  # the dev cloud has Cinder: its volumes are compared


def test_a_volume_of_this_installation_no_instance_refers_to_is_an_orphan_and_a_root_volume_is_not(cloud):
    conn = cloud.conn
    mine, theirs = {"cloudpivot_installation": INSTALLATION}, {"cloudpivot_installation": "x"}
    lost = conn.block_storage.create_volume(size=1, name="lost-volume", metadata=mine)
    root = conn.block_storage.create_volume(size=1, name="root-volume", metadata=mine)
    foreign = conn.block_storage.create_volume(size=1, name="foreign-volume", metadata=theirs)
    try:
        Instance.objects.filter(pk=known_instance(cloud, None, name="on-a-volume").pk).update(root_volume_ref=root.id)
        found = report(cloud)
        orphan = found[lost.id]
        assert (orphan.category, orphan.kind, orphan.name) == ("orphan", "volume", "lost-volume")
        assert root.id not in found and foreign.id not in found
    finally:
        for volume in (lost, root, foreign):
            conn.block_storage.wait_for_status(volume, "available", failures=["error"], interval=1, wait=60)
            conn.block_storage.delete_volume(volume)


# ---------------------------------------------------------------------------- delete from the admin
def test_deleting_an_orphan_server_from_the_admin_removes_it_from_the_cloud_and_is_audited(cloud):
    lost = cloud.server("lost-to-delete", [installation_tag()], ours())
    finding = report(cloud)[lost.id]
    client = superuser_client()

    text = act(client, "delete_in_cloud", [finding])

    assert "asked the os-dev cloud to delete server lost-to-delete" in text
    gone(cloud.conn, lost.id)
    entry = AuditEntry.objects.get(action="resources:orphan-delete")
    assert (entry.outcome, entry.actor_name, entry.via) == ("ok", "root", "admin")
    assert entry.object_ref == f"os-dev/server/{lost.id}"
    assert AuditEntry.objects.filter(via="admin", details__admin_action="delete_in_cloud").exists()  # the request
    assert lost.id not in report(cloud)
    assert OrphanFinding.objects.get(pk=finding.pk).state == "resolved"


def test_protected_servers_are_listed_and_never_deleted(cloud):
    tagged = cloud.server("protected-by-tag", [installation_tag(), "cloudpivot-protected"], ours())
    locked = cloud.server("locked-in-nova", [installation_tag()], ours())
    retried(cloud.conn.compute.lock_server, locked.id)
    found = report(cloud)
    assert found[tagged.id].protected_reason == "tagged cloudpivot-protected"
    assert found[locked.id].protected_reason == "locked in Nova"
    client = superuser_client()

    text = act(client, "delete_in_cloud", [found[tagged.id], found[locked.id]])

    assert "server protected-by-tag is protected: tagged cloudpivot-protected" in text
    assert "server locked-in-nova is protected: locked in nova" in text
    for server in (tagged, locked):
        assert cloud.conn.compute.get_server(server.id).status == "ACTIVE"
    outcomes = set(AuditEntry.objects.filter(action="resources:orphan-delete").values_list("outcome", flat=True))
    assert outcomes == {"refused"}


def test_a_delete_rechecks_the_tag_and_protection_in_the_cloud_at_action_time(cloud):
    untagged_later = cloud.server("untagged-later", [installation_tag()], ours())
    protected_later = cloud.server("protected-later", [installation_tag()], ours())
    found = report(cloud)
    retried(cloud.conn.compute.remove_tag_from_server, untagged_later, installation_tag())
    retried(cloud.conn.compute.add_tag_to_server, protected_later, "cloudpivot-protected")
    client = superuser_client()

    text = act(client, "delete_in_cloud", [found[untagged_later.id], found[protected_later.id]])

    assert "server untagged-later does not carry this installation's tag: left alone" in text
    assert "server protected-later is protected" in text
    assert cloud.conn.compute.get_server(untagged_later.id).status == "ACTIVE"
    assert cloud.conn.compute.get_server(protected_later.id).status == "ACTIVE"


# ---------------------------------------------------------------------------- adopt from the admin
def test_adopting_an_orphan_server_makes_an_instance_after_checking_tag_state_and_owner(cloud):
    lost = cloud.server("adopt-me", [installation_tag()], ours())
    finding = report(cloud)[lost.id]
    client = superuser_client()

    form = act(client, "adopt_servers", [finding])
    assert "adopt orphan servers" in form and 'name="owner"' in form  # the intermediate page

    invalid = act(client, "adopt_servers", [finding], apply="1", owner="999999", project="nowhere")
    assert invalid.count("select a valid choice") == 2  # the form again, with both fields at fault
    refused = act(client, "adopt_servers", [finding], apply="1", owner=cloud.world.rita.pk, project="alpha")
    assert "rita is reader in project alpha; owners need submitter" in refused
    assert not Instance.objects.filter(server_id=lost.id).exists()
    refused = act(client, "adopt_servers", [finding], apply="1", owner=cloud.world.charlie.pk, project="beta")
    assert "project beta may not use the os-dev cloud" in refused

    text = act(client, "adopt_servers", [finding], apply="1", owner=cloud.world.bob.pk, project="alpha", name="mine")

    assert f"adopted server {lost.id} as instance mine" in text
    instance = Instance.objects.get(server_id=lost.id)
    assert (instance.owner, instance.project, instance.connection) == (
        cloud.world.bob,
        cloud.world.alpha,
        cloud.connection,
    )
    assert (instance.status, instance.flavor, instance.vcpus, instance.memory_mb) == ("Running", "cp.tiny", 1, 64)
    server = cloud.conn.compute.get_server(lost.id)
    assert server.metadata["cloudpivot_instance"] == str(instance.pk)
    assert instance_tag(str(instance.pk)) in server.tags
    assert OrphanFinding.objects.get(pk=finding.pk).state == "adopted"
    entry = AuditEntry.objects.get(action="resources:orphan-adopt", outcome="ok")
    assert entry.details["instance"] == str(instance.pk) and entry.details["owner"] == "bob"
    assert lost.id not in report(cloud)  # known now


def test_a_server_made_for_a_batch_attempt_or_in_a_failed_state_is_not_adopted(cloud):
    attempt_server = cloud.server("cp-lostattempt-1", [installation_tag()], {**ours(), "cloudpivot_attempt": "cp-x-1"})
    broken = cloud.server("broken-server", [installation_tag()], ours())
    found = report(cloud)
    assert "cp-x-1, which cloudpivot has no record of" in found[attempt_server.id].reason.lower()
    retried(cloud.conn.compute.reset_server_state, broken.id, "error")  # what Nova shows after a failed build or action
    client = superuser_client()

    adopt = {"apply": "1", "owner": cloud.world.bob.pk, "project": "alpha"}
    text = act(client, "adopt_servers", [found[attempt_server.id]], **adopt)
    assert "server cp-lostattempt-1 was made for batch attempt cp-x-1; it is not adoptable" in text
    text = act(client, "adopt_servers", [found[broken.id]], **adopt)
    assert "server broken-server is error; adopt it once it is active or shutoff with no task in flight" in text
    assert not Instance.objects.filter(server_id__in=[attempt_server.id, broken.id]).exists()
    assert set(AuditEntry.objects.filter(action="resources:orphan-adopt").values_list("outcome", flat=True)) == {
        "refused"
    }


def test_the_admin_report_page_lists_findings_and_scans_on_request(cloud):
    lost = cloud.server("listed-server", [installation_tag()], ours())
    client = superuser_client()

    response = client.post(CHANGELIST + "scan/", follow=True)

    assert response.status_code == 200
    text = response.content.decode()
    assert "os-dev: " in text.lower() and "listed-server" in text and "Scan the clouds now" in text
    assert OrphanFinding.objects.get(ref=lost.id).category == "orphan"
    assert client.get(CHANGELIST + "scan/").status_code == 405  # scanning is a POST


# ---------------------------------------------------------------------------- two connections, one cloud
def test_a_live_task_server_of_another_connection_to_the_same_cloud_is_not_an_orphan(cloud, monkeypatch):
    from django_q.conf import Conf

    from tests.builders import admit

    other = CloudConnection.objects.create(
        cloud_id="os-dev-2",
        backend="openstack",
        credentials_ref=cloud.connection.credentials_ref,
        options={**cloud.connection.options, "flavor": "cp.tiny"},
    )
    other.projects.add(cloud.world.alpha)
    monkeypatch.setattr(Conf, "SYNC", False)  # admitted, its start queued: the test plays the server
    from tasks.services.submission import task_submit

    task, _ = task_submit(user=cloud.world.bob, document={"cloud": "os-dev-2", "command": ["sleep", "60"]})
    attempt = admit(task)
    server = cloud.server(
        attempt.external_name,
        [installation_tag()],
        {**ours(), "cloudpivot_attempt": attempt.external_name, "cloudpivot_task": str(task.pk)},
    )
    lost = cloud.server("lost-beside-it", [installation_tag()], ours())

    found = report(cloud)  # os-dev's report: the cloud holds os-dev-2's server too

    assert server.id not in found
    assert found[lost.id].category == "orphan"


def test_a_superuser_deletes_a_connection_with_findings_which_are_closed_with_it_and_audited(cloud):
    lost = cloud.server("lost-before-delete", [installation_tag()], ours())
    assert report(cloud)[lost.id].category == "orphan"
    client = superuser_client()
    url = f"/admin/clusters/cloudconnection/{cloud.connection.pk}/delete/"

    page = html.unescape(client.get(url).content.decode())
    assert "permission to delete" not in page
    response = client.post(url, {"post": "yes"}, follow=True)

    assert response.status_code == 200
    assert not CloudConnection.objects.filter(cloud_id="os-dev").exists()
    assert not OrphanFinding.objects.exists()
    entry = AuditEntry.objects.get(action="clusters:connection-delete")
    assert (entry.object_ref, entry.actor_name, entry.via) == ("os-dev", "root", "admin")
    assert [f["ref"] for f in entry.details["orphan_findings_closed"]] == [lost.id]
