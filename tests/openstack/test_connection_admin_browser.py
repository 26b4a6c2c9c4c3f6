"""A new admin connects the development OpenStack in the admin, in headless Chromium against a real Daphne.

Every step is the page's: the add form refuses a misspelled option key on its field, then a flavor the cloud
does not have (listing the flavors it has); "Test connection" stores the health the page and the API show;
the grant is made in the same form. Then a member of the granted project creates an instance through the
API and it reaches Running (Nova ACTIVE).
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from clusters.models import CloudConnection
from tests.plugins.browser import screenshot
from tests.plugins.openstack import INSTALLATION

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def save(page) -> None:
    """Save and continue; asked again while the shared dev OpenStack (other tests hammer it) times out."""
    for _ in range(3):
        page.click("input[name=_continue]")
        if not page.locator(".errorlist", has_text="the cloud did not answer").count():
            return


@pytest.fixture
def cleanup_servers(openstack_cloud):
    yield
    conn = openstack_cloud.conn
    for server in list(conn.compute.servers(tags=f"cloudpivot-{INSTALLATION}")):
        conn.compute.delete_server(server.id, ignore_missing=True)


def test_an_admin_connects_the_dev_openstack_and_a_member_creates_an_instance(
    browser, live, world, openstack_cloud, api, settings, cleanup_servers
):
    settings.INSTALLATION_ID = INSTALLATION
    settings.INSTANCE_OPERATION_DEADLINE_SECONDS = 60
    get_user_model().objects.create_superuser("root", "root@example.org", "pw-root-onboard")
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.set_default_timeout(90_000)  # saving asks the cloud; the shared dev OpenStack is slow under load
    try:
        page.goto(f"{live.url}/admin/login/?next=/admin/clusters/cloudconnection/add/")
        page.fill("input[name=username]", "root")
        page.fill("input[name=password]", "pw-root-onboard")
        page.click("input[type=submit]")
        expect(page.locator("#id_os_flavor")).to_be_visible()

        # 1. a typo in an option key: refused on "Other options", the key named
        page.fill("#id_cloud_id", "os-dev")
        page.select_option("#id_backend", "openstack")
        page.fill("#id_credentials_ref", openstack_cloud.clouds_yaml)
        page.fill("#id_os_cloud", openstack_cloud.cloud)
        page.fill("#id_os_flavor", "cp.tiny")
        page.fill("#id_os_image", "cp-runner-fake")
        page.fill("#id_os_networks", "none")
        page.fill("#id_options", '{"flavour": "cp.tiny"}')
        page.click("input[name=_continue]")
        expect(page.locator(".field-options .errorlist")).to_contain_text(
            "unknown option 'flavour' for openstack connections (did you mean 'flavor'?)"
        )

        # 2. a flavor the cloud does not have: refused on "Flavor", listing the flavors it has
        page.fill("#id_options", "{}")
        page.fill("#id_os_flavor", "cp.tinny")
        save(page)
        flavor_error = page.locator(".field-os_flavor .errorlist")
        expect(flavor_error).to_contain_text("flavor 'cp.tinny': not found in this project; there are:")
        expect(flavor_error).to_contain_text("cp.tiny")
        expect(flavor_error).to_contain_text("cp.nohost")
        screenshot(page, "admin-connection-wrong-flavor", full_page=True)

        # 3. right: saved, and the page of the new connection opens
        page.fill("#id_os_flavor", "cp.tiny")
        save(page)
        expect(page.locator("ul.messagelist")).to_contain_text("was added successfully")
        expect(page.locator("#connection-health")).to_contain_text("Unknown")

        # 4. Test connection: each check, then the verdict, stored as the health
        page.click("#test-connection")
        messages = page.locator("ul.messagelist")
        expect(messages).to_contain_text("ok authentication (Keystone)")
        expect(messages).to_contain_text("ok flavor 'cp.tiny': exists")
        expect(messages).to_contain_text("OK: everything CloudPivot needs is there")
        expect(page.locator("#connection-health")).to_contain_text("Health: OK")
        screenshot(page, "admin-connection-tested", full_page=True)

        # 5. the grant, in the same form
        page.select_option("#id_projects_from", label="alpha")
        page.click("#id_projects_add")
        page.click("input[name=_save]")
        expect(page.locator("ul.messagelist")).to_contain_text("was changed successfully")
    finally:
        page.close()

    connection = CloudConnection.objects.get(cloud_id="os-dev")
    assert connection.health_status == "ok"
    assert list(connection.projects.values_list("slug", flat=True)) == ["alpha"]
    clouds = {c["cloud_id"]: c for c in api("bob").get("/api/v1/clouds").json()}
    assert clouds["os-dev"]["health_status"] == "ok", clouds

    # 6. a member of alpha creates an instance through the API; the worker's part runs inline (live)
    document = {
        "name": "first-vm",
        "cloud": "os-dev",
        "project": "alpha",
        "flavor": "cp.tiny",
        "image": "cp-runner-fake",
    }
    response = api("bob").post("/api/v1/instances", document, format="json")
    assert response.status_code == 202, response.json()
    operation = api("bob").get(f"/api/v1/operations/{response.json()['id']}").json()
    assert operation["state"] == "succeeded", operation
    instance = api("bob").get(f"/api/v1/instances/{operation['instance']}").json()
    assert instance["status"] == "Running", instance
    server = openstack_cloud.conn.compute.get_server(instance["server_id"])
    assert server.status == "ACTIVE"
