"""The launch form through Django's test client against the dev OpenStack (jobs are only queued here):
what it offers (sizes with vCPU and memory, within quota or disabled with the reason; images and the
project's own snapshots), who may launch, and the service's refusals shown next to the field."""

from __future__ import annotations

import re

import pytest

from cloudpivot.accounts.models import Quota
from clusters.models import CloudConnection
from resources.backends import get_instance_backend
from resources.models import Instance, Operation, Snapshot
from tests import helpers
from tests.plugins.kube import kube_connection_to
from tests.resources.kubevirt_world import make_connection
from tests.resources.launch_form import field_errors, launch, page_client

pytestmark = pytest.mark.e2e


def cloud_image_id(os_world, name: str) -> str:
    return os_world.conn.image.find_image(name).id


def test_the_form_offers_the_clouds_sizes_with_vcpu_and_memory_and_images(os_world):
    bob = page_client(os_world.world.bob)
    assert 'href="/instances/new/"' in bob.get("/instances/").content.decode()
    html = bob.get("/instances/new/").content.decode()
    assert '<option value="os-dev" selected>os-dev (openstack)</option>' in html
    assert '"local"' not in html  # the local cloud has no VM instances
    flavors = get_instance_backend(os_world.connection).flavors()
    assert flavors, "the dev OpenStack has flavors"
    for flavor in flavors:
        row = re.search(rf'<tr data-size="{re.escape(flavor.name)}".*?</tr>', html, re.S).group(0)
        cells = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        assert cells[1:3] == [str(flavor.vcpus), f"{flavor.memory_mb} MB"]
    image_id = cloud_image_id(os_world, "cp-runner-fake")
    assert f'<option value="{image_id}">cp-runner-fake</option>' in html


def test_sizes_over_the_quota_are_disabled_with_the_reason(os_world):
    world = os_world.world
    # the dev cloud's flavors differ in root disk (cp.nohost asks 5000000 GB), so the volume limit parts them
    Quota.objects.create(project=world.alpha, connection=os_world.connection, max_volume_gb=10)
    flavors = get_instance_backend(os_world.connection).flavors()
    small = [f for f in flavors if f.disk_gb <= 10]
    large = [f for f in flavors if f.disk_gb > 10]
    assert small and large, [f.name for f in flavors]
    html = page_client(world.bob).get("/instances/new/?cloud=os-dev&project=alpha").content.decode()
    for flavor in large:
        row = re.search(rf'<tr data-size="{re.escape(flavor.name)}".*?</tr>', html, re.S).group(0)
        assert "data-refused" in row and " disabled" in row
        assert (
            f"quota exceeded: volume GB {flavor.disk_gb}/10 left (project alpha&#x27;s quota on os-dev allows 10)"
            in row
        )
    for flavor in small:
        row = re.search(rf'<tr data-size="{re.escape(flavor.name)}".*?</tr>', html, re.S).group(0)
        assert "data-refused" not in row and " disabled" not in row
    # sent anyway (a stale page), the service refuses it next to the size, and nothing is made
    response = launch(page_client(world.bob), flavor=large[0].name)
    assert response.status_code == 400
    assert "quota exceeded: volume GB" in field_errors(response.content.decode(), "flavor")
    assert not Instance.objects.exists()


def test_bob_launches_and_a_double_click_makes_one_instance(os_world):
    bob = page_client(os_world.world.bob)
    image_id = cloud_image_id(os_world, "cp-runner-fake")
    first = launch(bob, image=image_id, idempotency_key="portal-double")
    assert first.status_code == 302
    instance = Instance.objects.get()
    assert first["Location"] == f"/instances/{instance.pk}/"
    assert (instance.name, instance.project.slug, instance.flavor, instance.image) == (
        "vm1",
        "alpha",
        "cp.tiny",
        image_id,
    )
    operation = Operation.objects.get(instance=instance)
    assert (operation.action, operation.requested_by, operation.idempotency_key) == (
        "create",
        os_world.world.bob,
        "portal-double",
    )
    again = launch(bob, image=image_id, idempotency_key="portal-double")
    assert again.status_code == 302 and again["Location"] == first["Location"]
    assert Instance.objects.count() == 1
    detail = bob.get(first["Location"]).content.decode()
    assert "Launch of vm1 requested" in detail and 'hx-trigger="every 2s"' in detail  # the live panel follows it


def test_a_reader_may_not_launch(os_world):
    rita = page_client(os_world.world.rita)
    assert 'href="/instances/new/"' not in rita.get("/instances/").content.decode()
    page = rita.get("/instances/new/")
    assert page.status_code == 200 and 'id="launch-none"' in page.content.decode()
    assert launch(rita).status_code == 403
    assert not Instance.objects.exists()


def test_an_outsider_cannot_pick_another_projects_cloud_or_project(os_world, openstack_cloud):
    world = os_world.world
    alpha_only = CloudConnection.objects.create(
        cloud_id="os-alpha",
        backend="openstack",
        credentials_ref=openstack_cloud.clouds_yaml,
        options=os_world.connection.options,
    )
    alpha_only.projects.add(world.alpha)
    charlie = page_client(world.charlie)
    html = charlie.get("/instances/new/").content.decode()
    assert "os-alpha" not in html and '<option value="alpha"' not in html
    assert '<option value="beta" selected>' in html
    response = launch(charlie, cloud="os-alpha", project="beta")
    assert response.status_code == 400
    assert "os-alpha is not one of the available choices" in field_errors(response.content.decode(), "cloud")
    response = launch(charlie, cloud="os-dev", project="alpha")
    assert response.status_code == 400
    assert "alpha is not one of the available choices" in field_errors(response.content.decode(), "project")
    # bob sees both clouds
    assert "os-alpha" in page_client(world.bob).get("/instances/new/").content.decode()
    assert not Instance.objects.exists()


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"name": "-bad name"}, "name", "letters, digits"),
        ({"name": ""}, "name", "This field is required"),
        ({"image": "no-such-image"}, "image", "no image 'no-such-image'"),
        ({"flavor": "no-such-size"}, "flavor", "no flavor 'no-such-size'"),
        ({"flavor": ""}, "flavor", "Choose a size"),
    ],
)
def test_bad_input_is_refused_next_to_the_field(os_world, fields, field, words):
    response = launch(page_client(os_world.world.bob), **fields)
    assert response.status_code == 400
    html = response.content.decode()
    assert words in field_errors(html, field).replace("&#x27;", "'")
    assert 'class="form-errors"' not in html  # nothing on top: the field says it
    assert not Instance.objects.exists()


def test_the_projects_own_snapshots_are_offered_and_launch_through_the_restore_path(os_world):
    world = os_world.world
    image_id = cloud_image_id(os_world, "cp-runner-fake")
    mine = Snapshot.objects.create(
        name="golden",
        project=world.alpha,
        owner=world.bob,
        connection=os_world.connection,
        image_id=image_id,
        status="available",
    )
    html = page_client(world.bob).get("/instances/new/?cloud=os-dev&project=alpha").content.decode()
    assert f'<option value="snapshot:{mine.pk}">golden (snapshot of a deleted instance)</option>' in html
    assert f'<option value="{image_id}">' not in html  # a snapshot's image is offered as the snapshot only
    charlie_html = page_client(world.charlie).get("/instances/new/").content.decode()
    assert "golden" not in charlie_html
    # charlie naming alpha's snapshot by hand is refused next to the image
    response = launch(page_client(world.charlie), project="beta", image=f"snapshot:{mine.pk}")
    assert response.status_code == 400
    assert "not found" in field_errors(response.content.decode(), "image")
    response = launch(page_client(world.bob), image=f"snapshot:{mine.pk}", name="from-golden")
    assert response.status_code == 302
    operation = Operation.objects.get(action="create")
    assert operation.snapshot == mine and operation.instance.image == image_id


def test_a_kubevirt_cloud_offers_its_sizes_and_takes_a_container_disk_reference(world, kube, token_file):
    kube.serve_kubevirt()
    make_connection(kube, token_file, world)  # sizes small (1 vCPU, 1 GB) and big (2 vCPU, 4 GB)
    Quota.objects.create(project=world.alpha, max_vcpu=1)
    bob = page_client(world.bob)
    html = bob.get("/instances/new/?cloud=kv-lab").content.decode()
    assert '<option value="kv-lab" selected>kv-lab (kubernetes)</option>' in html
    small = re.search(r'<tr data-size="small".*?</tr>', html, re.S).group(0)
    big = re.search(r'<tr data-size="big".*?</tr>', html, re.S).group(0)
    assert "1024 MB" in small and " checked" in small and "data-refused" not in small
    assert "4096 MB" in big and "data-refused" in big and "quota exceeded: vCPU 2/1 left" in big
    assert '<input type="text" name="image" id="id_image"' in html  # any container-disk reference
    response = launch(bob, cloud="kv-lab", flavor="small", image="not a reference!")
    assert response.status_code == 400
    assert "is not a container image reference" in field_errors(response.content.decode(), "image")
    response = launch(bob, cloud="kv-lab", flavor="small", image="quay.io/containerdisks/fedora:40")
    assert response.status_code == 302
    instance = Instance.objects.get()
    assert (instance.backend, instance.flavor, instance.vcpus, instance.image) == (
        "kubernetes",
        "small",
        1,
        "quay.io/containerdisks/fedora:40",
    )


def test_a_cluster_without_kubevirt_is_not_offered(world, kube, token_file):
    kube_connection_to(kube.url, token_file, world.alpha, cloud_id="kube-plain")
    html = page_client(world.bob).get("/instances/new/").content.decode()
    assert "kube-plain" not in html and 'id="launch-none"' in html


def test_the_refresh_without_javascript_posts_back_keeps_what_was_typed_and_launches_nothing(os_world):
    bob = page_client(os_world.world.bob)
    assert helpers.csrf_problems(bob.get("/instances/new/").content.decode()) == []
    answer = launch(bob, refresh="1", name="typed-name", flavor="")
    html = answer.content.decode()
    assert answer.status_code == 200 and 'value="typed-name"' in html
    assert "field-errors" not in html  # a refresh is not a submission: nothing is validated
    assert helpers.csrf_problems(html) == []
    assert not Instance.objects.filter(name="typed-name").exists()
    assert not Operation.objects.filter(instance__name="typed-name").exists()
