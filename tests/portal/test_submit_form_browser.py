"""The submit form that fits the cloud, in headless Chromium against the real Daphne (`live`): filled and sent
for the local cloud, the kmock Kubernetes cloud and the development OpenStack, each task's spec read back from
the API; clone and edit into the fields; the refresh without JavaScript. No worker runs: the tasks wait."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from cloudpivot.accounts.project_secrets import secret_create
from resources.choices import SnapshotStatus
from resources.models import Snapshot
from tests import helpers
from tests.clusters.kube_api import PVCS
from tests.plugins.browser import LAPTOP, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def api_spec(live, world, page) -> dict:
    task_id = re.search(r"/tasks/([0-9a-f-]{36})/", page.url).group(1)
    return helpers.api_call(live.url, "GET", f"/api/v1/tasks/{task_id}", world.tokens["bob"])["spec"]


def watch_requests(page) -> list:
    """Every request the page sends: no URL may carry the CSRF token, every POST must (header or body)."""
    sent: list = []
    page.on("request", lambda request: sent.append(request))
    return sent


def check_csrf(sent: list) -> None:
    for request in sent:
        assert helpers.CSRF_FIELD not in request.url, request.url
        if request.method == "POST":
            has_header = bool(request.headers.get("x-csrftoken"))
            assert has_header or helpers.CSRF_FIELD in (request.post_data or ""), request.url


def test_a_local_task_from_the_form(open_page, live, world):
    page = open_page("bob")
    sent = watch_requests(page)
    page.goto("/tasks/new")
    expect(page.locator("#submit-cloud-note")).to_contain_text(
        "local (Local host): runs the command on the CloudPivot host"
    )
    expect(page.get_by_label("Image")).to_have_count(0)  # the host runs the command: no image, no GPUs
    expect(page.get_by_label("GPUs")).to_have_count(0)
    page.get_by_label("Name").fill("local from the form")
    page.get_by_label("Command").fill("python3\n-c\nprint('hi')")
    page.get_by_label("Labels").fill("team=ml\nstage=test")
    page.get_by_label("Working directory").fill("/tmp")
    page.get_by_label("Timeout (seconds)").fill("120")
    page.get_by_role("button", name="Submit task").first.click()
    page.wait_for_url(re.compile(r"/tasks/[0-9a-f-]{36}/$"))
    spec = api_spec(live, world, page)
    assert spec["command"] == ["python3", "-c", "print('hi')"] and spec["labels"] == {"team": "ml", "stage": "test"}
    assert spec["workdir"] == "/tmp" and spec["timeout_seconds"] == 120 and spec["image"] is None
    check_csrf(sent)


def test_a_kubernetes_task_from_the_form_then_cloned_with_a_change(open_page, live, world, kube, kube_connection):
    secret_create(user=world.alice, project=world.alpha, name="db-password", value="s3cret-value")
    claim = {"name": "data", "annotations": {"cloudpivot.io/projects": "alpha"}}
    kube.put(PVCS, "tasks", {"metadata": claim, "spec": {"accessModes": ["ReadWriteOnce"]}})
    page = open_page("bob")
    sent = watch_requests(page)
    page.goto("/tasks/new")
    page.get_by_label("Name").fill("train on k3s")
    page.get_by_label("Command").fill("python3\ntrain.py")
    page.get_by_label("Cloud").select_option("local")  # htmx posts the form back: the cloud's own fields
    expect(page.locator("#submit-cloud-note")).to_contain_text("local (Local host)")
    expect(page.get_by_label("Image")).to_have_count(0)
    page.get_by_label("Cloud").select_option("k3s-lab")
    expect(page.locator("#submit-cloud-note")).to_contain_text("k3s-lab (Kubernetes): each task is a pod")
    expect(page.get_by_label("Name")).to_have_value("train on k3s")  # what was typed stays
    expect(page.get_by_label("Secrets")).to_be_visible()
    expect(page.locator("#id_form-secrets_helptext")).to_contain_text("This project's secrets: db-password.")
    page.get_by_label("Image").fill("python:3.12-slim")
    page.get_by_label("CPU").fill("0.5")
    page.get_by_label("Memory (MB)").fill("512")
    page.get_by_label("GPUs").fill("0")
    page.get_by_label("Volumes").fill("data:/data:ro")
    page.get_by_label("Secrets").fill("db-password=DB_PASSWORD")
    page.get_by_label("Environment").fill("EPOCHS=3")
    screenshot(page, "task-submit-kubernetes", full_page=True)
    page.get_by_role("button", name="Submit task").first.click()
    page.wait_for_url(re.compile(r"/tasks/[0-9a-f-]{36}/$"))
    spec = api_spec(live, world, page)
    assert spec["cloud"] == "k3s-lab" and spec["image"] == "python:3.12-slim"
    assert spec["resources"] == {"cpu": 0.5, "memory_mb": 512, "gpu": 0}
    assert spec["volumes"] == [{"claim": "data", "mount_path": "/data", "read_only": True}]
    assert spec["secrets"] == [{"name": "db-password", "env": "DB_PASSWORD"}] and spec["env"] == {"EPOCHS": "3"}

    # Clone and edit: the form holds it all, so it opens on the form; one change, the rest as it was
    page.get_by_role("link", name="Clone and edit").click()
    expect(page.locator("#panel-form")).to_be_visible()
    expect(page.get_by_label("Image")).to_have_value("python:3.12-slim")
    expect(page.get_by_label("Volumes")).to_have_value("data:/data:ro")
    expect(page.get_by_label("Secrets")).to_have_value("db-password=DB_PASSWORD")
    expect(page.locator("#image-choices option")).to_have_count(1)  # the recent image, offered
    page.get_by_label("Memory (MB)").fill("2048")
    page.get_by_label("Name").fill("train on k3s, more memory")
    page.get_by_role("button", name="Submit task").first.click()
    page.wait_for_url(re.compile(r"/tasks/[0-9a-f-]{36}/$"))
    again = api_spec(live, world, page)
    assert again["resources"] == {"cpu": 0.5, "memory_mb": 2048, "gpu": 0} and again["name"].endswith("more memory")
    assert {k: v for k, v in again.items() if k not in ("resources", "name")} == {
        k: v for k, v in spec.items() if k not in ("resources", "name")
    }
    check_csrf(sent)
    assert any(r.method == "POST" and r.headers.get("hx-request") for r in sent)  # the refresh went by htmx


def test_without_javascript_the_refresh_button_shows_the_clouds_fields(browser, live, world, kube, kube_connection):
    context = browser.new_context(viewport=LAPTOP, base_url=live.url, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto("/accounts/login/")
        page.get_by_label("Username or email").fill("bob")
        page.get_by_label("Password").fill("pw-bob")
        page.get_by_role("button", name="Log in").click()
        page.goto("/tasks/new")
        expect(page.get_by_label("Cloud")).to_have_value("k3s-lab")  # the first cloud: its fields
        page.get_by_label("Command").fill("echo\nhi")
        page.get_by_label("Image").fill("busybox")
        page.get_by_label("Cloud").select_option("local")
        expect(page.get_by_label("Image")).to_be_visible()  # nothing runs on change without JavaScript
        page.get_by_role("button", name="Show the fields of the chosen cloud and project").click()
        expect(page.locator("#submit-cloud-note")).to_contain_text("local (Local host)")
        expect(page.get_by_label("Image")).to_have_count(0)
        expect(page.get_by_label("Command")).to_have_value("echo\nhi")
        page.get_by_label("Cloud").select_option("k3s-lab")
        page.get_by_role("button", name="Show the fields of the chosen cloud and project").click()
        expect(page.get_by_label("Image")).to_have_value("busybox")  # kept, hidden, while local was chosen
        assert helpers.CSRF_FIELD not in page.url and not helpers.csrf_problems(page.content())
    finally:
        context.close()


@pytest.fixture
def beta_snapshot(os_live, world):
    """An image in Glance that is project beta's CloudPivot snapshot: never offered to alpha's members."""
    conn = os_live.conn
    image = conn.image.create_image(
        name="beta-private-snapshot",
        data=b"not a disk",
        disk_format="raw",
        container_format="bare",
        visibility="public",
    )
    Snapshot.objects.create(
        name="beta-data",
        project=world.beta,
        owner=world.charlie,
        connection=os_live.connection,
        image_id=image.id,
        status=SnapshotStatus.AVAILABLE,
    )
    yield image
    conn.image.delete_image(image.id, ignore_missing=True)


def test_an_openstack_task_picks_its_image_from_glance(open_page, os_live, world, beta_snapshot):
    page = open_page("bob")
    sent = watch_requests(page)
    page.goto("/tasks/new")
    page.get_by_label("Command").fill("true")
    page.get_by_label("Cloud").select_option("os-dev")
    # The form part comes back once the cloud has listed its images: the shared dev OpenStack is slow under load
    expect(page.locator("#submit-cloud-note")).to_contain_text(
        "os-dev (OpenStack): each task gets a VM of the flavor cp.tiny", timeout=30_000
    )
    image = page.get_by_label("Image")
    expect(image.locator('option[value="cp-runner-fake"]')).to_have_count(1)  # from the cloud's image list
    expect(image.locator("option").first).to_have_text("The cloud's default image (cp-runner-fake)")
    expect(image.locator("option", has_text="beta-private-snapshot")).to_have_count(0)  # another project's
    expect(page.get_by_label("GPUs")).to_have_count(0)
    expect(page.get_by_label("Volumes")).to_have_count(0)
    image.select_option("cp-runner-fake")
    page.get_by_label("CPU").fill("1")
    screenshot(page, "task-submit-openstack", full_page=True)
    page.get_by_role("button", name="Submit task").first.click()
    page.wait_for_url(re.compile(r"/tasks/[0-9a-f-]{36}/$"))
    spec = api_spec(live=os_live.daphne, world=world, page=page)
    glance = os_live.conn.image.find_image("cp-runner-fake")
    assert spec["image"] == "cp-runner-fake" and spec["image_id"] == glance.id
    assert spec["resources"]["cpu"] >= 1  # what the task gets: its flavor's, at least what it asked
    check_csrf(sent)
