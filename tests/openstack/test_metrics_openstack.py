"""Sampling a real OpenStack (deploy/dev/openstack, Nova's fake driver): hypervisor statistics and quota use."""

from __future__ import annotations

import openstack
import openstack.config
import pytest

from clusters.backends import cloud_figures
from clusters.metrics.sampling import sample_all
from clusters.models import CloudConnection, MetricSample
from tests import helpers
from tests.plugins.openstack import tenant_connection, tenant_of_its_own

pytestmark = pytest.mark.e2e


@pytest.fixture
def os_connection(world, openstack_cloud):
    return CloudConnection.objects.create(
        cloud_id="os-dev",
        backend="openstack",
        credentials_ref=openstack_cloud.clouds_yaml,
        options={"cloud": openstack_cloud.cloud, "flavor": "cp.tiny", "image": "cp-runner-fake", "networks": "none"},
    )


def test_hypervisor_statistics_are_sampled(os_connection, openstack_cloud):
    figures = cloud_figures(os_connection)
    assert figures.nodes, f"no hypervisors; notes: {figures.notes}"
    # the same totals as Placement keeps them, read independently through the admin SDK connection
    placement = openstack_cloud.conn.placement
    totals = {
        rp.name: {inv.resource_class: inv.total for inv in placement.resource_provider_inventories(rp)}
        for rp in placement.resource_providers()
    }
    assert set(figures.nodes) <= set(totals)
    name, values = next(iter(figures.nodes.items()))
    assert values["cpu_capacity_cores"] == totals[name]["VCPU"]
    assert values["memory_capacity_bytes"] == totals[name]["MEMORY_MB"] * 1024 * 1024
    assert 0 <= values["cpu_used_cores"] <= values["cpu_capacity_cores"]

    result = sample_all()
    assert "os-dev" in result.clouds_ok, result.clouds_failed
    row = MetricSample.objects.get(
        connection=os_connection, subject_kind="node", subject_key=name, metric="cpu_capacity_cores"
    )
    assert row.value == values["cpu_capacity_cores"]


def test_the_projects_quota_use_and_limits_are_sampled(db, openstack_cloud, tmp_path):
    """On a Keystone project of its own: the admin's project is shared with every other test (and with CI's
    other suite), whose servers come and go while the figures are read; this one holds what the test made."""
    conn = openstack_cloud.conn
    with tenant_of_its_own(openstack_cloud, tmp_path, cloud="counted") as tenant:
        conn.set_compute_quotas(tenant.project.id, instances=7, cores=5)
        connection = tenant_connection(tenant, "os-counted")
        config = openstack.config.OpenStackConfig(config_files=[tenant.clouds_yaml])
        own = openstack.connection.Connection(config=config.get_one(cloud=tenant.cloud))
        flavor, image = own.compute.find_flavor("cp.tiny"), own.image.find_image(tenant.image)
        server = own.compute.create_server(name="counted", flavor_id=flavor.id, image_id=image.id, networks="none")
        try:
            own.compute.wait_for_server(server, status="ACTIVE", wait=120)
            figures = cloud_figures(connection)
        finally:
            own.compute.delete_server(server, ignore_missing=True)
    assert figures.connection["cloud_quota_used_instances"] == 1
    assert figures.connection["cloud_quota_limit_instances"] == 7
    assert figures.connection["cloud_quota_used_vcpus"] == flavor.vcpus
    assert figures.connection["cloud_quota_limit_vcpus"] == 5
    assert figures.connection["cloud_quota_used_ram_mb"] == flavor.ram
    # a member may not read hypervisors: said in a note, not an error
    assert not figures.nodes and any("no hypervisor statistics" in note for note in figures.notes), figures.notes


def test_server_diagnostics_of_our_servers(os_connection, openstack_cloud, settings):
    from tests.plugins.openstack import INSTALLATION

    settings.INSTALLATION_ID = INSTALLATION
    conn = openstack_cloud.conn
    flavor = conn.compute.find_flavor("cp.tiny")
    image = conn.image.find_image("cp-runner-fake")
    server = conn.compute.create_server(
        name="cp-metrics-diag",
        flavor_id=flavor.id,
        image_id=image.id,
        networks="none",
        tags=[f"cloudpivot-{INSTALLATION}"],
    )
    try:
        conn.compute.wait_for_server(server, status="ACTIVE", wait=120)
        # Nova asks the compute host over RPC; a busy dev cloud may miss the first ones (a note, then retry)
        values = helpers.wait_for(
            lambda: cloud_figures(os_connection).instances.get(server.id),
            timeout=120,
            interval=2,
            what="server diagnostics",
        )
        # Nova's diagnostics (canned by the fake driver: one vCPU at 15 %, "524288 MiB" maximum, 0 used)
        assert set(values) == {"cpu_capacity_cores", "cpu_used_cores", "memory_capacity_bytes", "memory_used_bytes"}
        assert values["cpu_capacity_cores"] >= 1 and 0 <= values["cpu_used_cores"] <= values["cpu_capacity_cores"]
        assert (
            values["memory_capacity_bytes"] > 0 and 0 <= values["memory_used_bytes"] <= values["memory_capacity_bytes"]
        )
        stored = MetricSample.objects.filter(connection=os_connection, subject_kind="instance", subject_key=server.id)
        helpers.wait_for(lambda: sample_all() and stored.exists(), timeout=120, interval=2, what="stored diagnostics")
        assert set(stored.values_list("metric", flat=True)) == set(values)
    finally:
        conn.compute.delete_server(server.id, ignore_missing=True)
