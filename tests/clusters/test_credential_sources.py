"""Cloud credentials come only from allowlisted places (files under CREDENTIALS_DIR, variables
CLOUDPIVOT_CLOUD_*): staff who may edit connections cannot make the server send its secret key or any
file to a host of their choosing. Refused in the admin with the field at fault, and again by the
backends (check_cloud, health) for a row that came from elsewhere."""

from __future__ import annotations

import http.server
import threading

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command

from clusters.models import CloudConnection


@pytest.fixture(autouse=True)
def _credentials_dir_apart(settings, tmp_path):
    """A credentials directory that holds nothing of the server's. The test settings' default, the temp dir,
    holds VAR_DIR (and its secret key) too when the checkout itself lives under /tmp."""
    settings.CREDENTIALS_DIR = tmp_path / "credentials"


@pytest.fixture
def connection_staff(client, world):
    """Staff with every cloud-connection permission and nothing else."""
    staff = get_user_model().objects.create_user("ops", "ops@example.org", "pw", is_staff=True)
    staff.user_permissions.set(
        Permission.objects.filter(content_type__app_label="clusters", content_type__model="cloudconnection")
    )
    client.force_login(staff)
    return client


@pytest.fixture
def recorder():
    """An HTTP server on loopback that remembers every Authorization header it is sent."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization", ""))
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()


def form(**fields) -> dict:
    return {
        "cloud_id": "k3s-evil",
        "name": "",
        "backend": "kubernetes",
        "max_active_tasks": "0",
        "endpoint": "https://203.0.113.9:6443",
        "scope": "tasks",
        "credentials_ref": "",
        "options": "{}",
    } | fields


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"credentials_ref": "env:DJANGO_SECRET_KEY"}, "credentials_ref", "only variables named CLOUDPIVOT_CLOUD_"),
        ({"credentials_ref": f"token-file:{settings.VAR_DIR}/secret_key"}, "credentials_ref", "is not under"),
        ({"credentials_ref": "/etc/passwd"}, "credentials_ref", "is not under the credentials directory"),
        ({"credentials_ref": "token-file:relative/token"}, "credentials_ref", "not an absolute path"),
        ({"options": '{"ca_file": "/etc/passwd"}'}, "options", "options.ca_file: /etc/passwd is not under"),
    ],
)
def test_the_admin_refuses_credentials_from_outside_the_allowlist(connection_staff, fields, field, words):
    response = connection_staff.post("/admin/clusters/cloudconnection/add/", form(**fields))
    assert response.status_code == 200  # the form again, with the error
    errors = response.context["adminform"].form.errors
    assert field in errors and words in errors[field][0], errors
    assert not CloudConnection.objects.filter(cloud_id="k3s-evil").exists()


def test_the_admin_takes_a_file_under_the_credentials_directory_and_a_cloud_variable(
    connection_staff, tmp_path, settings
):
    settings.CREDENTIALS_DIR = tmp_path
    token = tmp_path / "k3s-lab.token"
    token.write_text("t0ken\n")
    response = connection_staff.post(
        "/admin/clusters/cloudconnection/add/",
        form(credentials_ref=f"token-file:{token}", options=f'{{"ca_file": "{tmp_path}/ca.pem"}}'),
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    response = connection_staff.post(
        "/admin/clusters/cloudconnection/add/", form(cloud_id="k3s-env", credentials_ref="env:CLOUDPIVOT_CLOUD_K3S")
    )
    assert response.status_code == 302


def test_a_symlink_out_of_the_credentials_directory_is_refused(connection_staff, tmp_path, settings):
    settings.CREDENTIALS_DIR = tmp_path / "credentials"
    settings.CREDENTIALS_DIR.mkdir()
    (settings.CREDENTIALS_DIR / "token").symlink_to(settings.VAR_DIR / "secret_key")
    response = connection_staff.post(
        "/admin/clusters/cloudconnection/add/", form(credentials_ref=f"token-file:{settings.CREDENTIALS_DIR}/token")
    )
    assert "is not under the credentials directory" in response.context["adminform"].form.errors["credentials_ref"][0]


@pytest.mark.parametrize("ref", ["env:DJANGO_SECRET_KEY", "token-file:{var}/secret_key"])
def test_check_cloud_refuses_a_stored_row_that_names_a_server_secret_and_sends_nothing(world, recorder, ref):
    url, seen = recorder
    CloudConnection.objects.create(
        cloud_id="k3s-evil", backend="kubernetes", endpoint=url, credentials_ref=ref.format(var=settings.VAR_DIR)
    )
    with pytest.raises(CommandError) as error:
        call_command("check_cloud", "k3s-evil")
    message = str(error.value)
    assert "credentials_ref" in message
    assert "may not be used" in message or "is not under the credentials directory" in message, message
    assert seen == []  # the server never called the endpoint, let alone with its secret
    assert settings.SECRET_KEY not in str(error.value)


def test_check_cloud_refuses_an_openstack_ca_file_from_outside(world, tmp_path, settings):
    settings.CREDENTIALS_DIR = tmp_path
    (tmp_path / "app-cred.yaml").write_text("auth_url: http://127.0.0.1:9/v3\n")
    CloudConnection.objects.create(
        cloud_id="os-evil",
        backend="openstack",
        credentials_ref=str(tmp_path / "app-cred.yaml"),
        options={"ca_file": str(settings.VAR_DIR / "secret_key")},
    )
    with pytest.raises(CommandError, match="options.ca_file: .* is not under the credentials directory"):
        call_command("check_cloud", "os-evil")


def test_staff_cannot_delete_a_background_schedule_either(client, world):
    from django_q.models import Schedule

    schedule = Schedule.objects.create(name="probe", func="math.floor", args="1")
    staff = get_user_model().objects.create_user("ops", "ops@example.org", "pw", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="django_q"))
    client.force_login(staff)
    assert client.post(f"/admin/django_q/schedule/{schedule.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Schedule.objects.filter(pk=schedule.pk).exists()
