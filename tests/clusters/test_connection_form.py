"""The admin's connection form: typed fields per backend, each mistake refused on save with the field at fault.

No cloud is asked here ("Check against the cloud on save" is left unticked); tests/openstack/
test_connection_admin.py saves and tests against the development OpenStack.
"""

from __future__ import annotations

import json

import pytest
import yaml
from django.contrib.auth import get_user_model

from cloudpivot.accounts.models import AuditEntry
from clusters.models import CloudConnection

ADD = "/admin/clusters/cloudconnection/add/"
pytestmark = pytest.mark.django_db


@pytest.fixture
def root(client, world):
    user = get_user_model().objects.create_superuser("root", "root@example.org", "pw-root")
    client.force_login(user)
    return client


@pytest.fixture
def clouds_yaml(tmp_path, settings):
    settings.CREDENTIALS_DIR = tmp_path
    path = tmp_path / "clouds.yaml"
    path.write_text(
        yaml.safe_dump({"clouds": {"lab": {"auth": {"auth_url": "http://127.0.0.1:9/v3"}}, "prod": {"auth": {}}}})
    )
    path.chmod(0o600)
    return path


def openstack(clouds_yaml, **fields) -> dict:
    return {
        "cloud_id": "os-lab",
        "name": "",
        "backend": "openstack",
        "max_active_tasks": "0",
        "credentials_ref": str(clouds_yaml),
        "os_cloud": "lab",
        "os_flavor": "m1.small",
        "os_image": "ubuntu",
        "os_networks": "none",
        "options": "{}",
    } | fields


def errors_of(response) -> dict:
    assert response.status_code == 200, "saved, though the form is wrong"
    return response.context["adminform"].form.errors


def test_a_well_filled_openstack_form_saves_typed_options_and_the_grant(root, world, clouds_yaml):
    response = root.post(
        ADD,
        openstack(
            clouds_yaml,
            os_region="RegionOne",
            os_networks="tasks-net, storage-net",
            os_security_groups="cloudpivot-runner",
            os_boot_deadline_seconds="600",
            options='{"retention": "keep"}',
            projects=[world.alpha.pk],
        ),
    )
    assert response.status_code == 302, errors_of(response)
    connection = CloudConnection.objects.get(cloud_id="os-lab")
    assert connection.options == {
        "cloud": "lab",
        "region": "RegionOne",
        "flavor": "m1.small",
        "image": "ubuntu",
        "networks": ["tasks-net", "storage-net"],
        "security_groups": ["cloudpivot-runner"],
        "boot_deadline_seconds": 600,
        "retention": "keep",
    }
    assert list(connection.projects.values_list("slug", flat=True)) == ["alpha"]
    page = root.get(f"/admin/clusters/cloudconnection/{connection.pk}/change/").content.decode()
    assert 'name="os_flavor"' in page and 'value="m1.small"' in page
    assert 'name="endpoint"' not in page and 'name="scope"' not in page  # not read by OpenStack: not shown


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        (
            {"options": '{"flavour": "m1.small"}'},
            "options",
            "unknown option 'flavour' for openstack connections (did you mean 'flavor'?)",
        ),
        ({"options": '{"api_timeout_seconds": "fast"}'}, "options", "'api_timeout_seconds' must be a number"),
        ({"options": '{"retention": "forever"}'}, "options", "'retention' must be one of delete, keep"),
        ({"options": '{"root_disk": "cinder"}'}, "options", "'root_disk' must be one of ephemeral, volume"),
        ({"options": "[1, 2]"}, "options", "must be a JSON object"),
        ({"options": "{not json"}, "options", "valid JSON"),
        ({"os_boot_deadline_seconds": "soon"}, "os_boot_deadline_seconds", "whole number"),
        ({"os_cloud": "staging"}, "os_cloud", "has no entry 'staging'; its entries: lab, prod"),
        ({"os_cloud": ""}, "os_cloud", "is a clouds.yaml: name the entry to use (its entries: lab, prod)"),
        ({"credentials_ref": ""}, "credentials_ref", "name the credentials file"),
        ({"endpoint": "https://keystone.example.org"}, "endpoint", "leave this empty"),
        ({"scope": "my-project"}, "scope", "leave this empty"),
        ({"k8s_context": "lab"}, "k8s_context", "not read by openstack connections"),
        ({"options": '{"flavor": "m1.large"}'}, "options", "'flavor' is set twice"),
    ],
)
def test_each_openstack_mistake_is_refused_on_its_field(root, clouds_yaml, fields, field, words):
    errors = errors_of(root.post(ADD, openstack(clouds_yaml, **fields)))
    assert field in errors and any(words in message for message in errors[field]), errors
    assert not CloudConnection.objects.filter(cloud_id="os-lab").exists()


def test_a_credentials_file_that_is_missing_or_unreadable_is_refused(root, clouds_yaml, tmp_path):
    errors = errors_of(root.post(ADD, openstack(clouds_yaml, credentials_ref=str(tmp_path / "nope.yaml"))))
    assert "does not exist or CloudPivot cannot read it" in errors["credentials_ref"][0]
    junk = tmp_path / "junk.yaml"
    junk.write_text("just: words\n")
    errors = errors_of(root.post(ADD, openstack(clouds_yaml, credentials_ref=str(junk), os_cloud="")))
    assert "neither a clouds.yaml nor an application-credential file" in errors["credentials_ref"][0]


def test_an_application_credential_file_needs_no_entry(root, clouds_yaml, tmp_path):
    credential = tmp_path / "app-cred.yaml"
    credential.write_text(
        "auth_url: http://127.0.0.1:9/v3\napplication_credential_id: abc\napplication_credential_secret: s3cret\n"
    )
    response = root.post(ADD, openstack(clouds_yaml, credentials_ref=str(credential), os_cloud=""))
    assert response.status_code == 302, errors_of(response)
    assert "cloud" not in CloudConnection.objects.get(cloud_id="os-lab").options


def test_a_kubernetes_form_takes_its_fields_and_refuses_unknown_options(root, world, tmp_path, settings):
    settings.CREDENTIALS_DIR = tmp_path
    token = tmp_path / "k3s.token"
    token.write_text("t0ken\n")
    form = {
        "cloud_id": "k3s-lab",
        "backend": "kubernetes",
        "max_active_tasks": "0",
        "endpoint": "https://127.0.0.1:6443",
        "scope": "tasks",
        "credentials_ref": f"token-file:{token}",
        "k8s_image_pull_secrets": "regcred",
        "options": '{"default_resources": {"cpu": 1, "memory_mb": 512}}',
        "projects": [world.beta.pk],
    }
    wrong = errors_of(root.post(ADD, form | {"options": '{"namespace": "tasks"}'}))
    assert "unknown option 'namespace' for kubernetes connections" in wrong["options"][0]
    missing = errors_of(root.post(ADD, form | {"credentials_ref": f"token-file:{tmp_path}/none"}))
    assert "does not exist or CloudPivot cannot read it" in missing["credentials_ref"][0]
    no_url = errors_of(root.post(ADD, form | {"endpoint": ""}))
    assert "API server URL" in no_url["endpoint"][0]
    response = root.post(ADD, form)
    assert response.status_code == 302, errors_of(response)
    connection = CloudConnection.objects.get(cloud_id="k3s-lab")
    assert connection.options == {"default_resources": {"cpu": 1, "memory_mb": 512}, "image_pull_secrets": ["regcred"]}
    assert connection.scope == "tasks" and list(connection.projects.all()) == [world.beta]


def test_kubernetes_default_resources_have_fields_of_their_own(root, world, tmp_path, settings):
    settings.CREDENTIALS_DIR = tmp_path
    form = {
        "cloud_id": "k3s-defaults",
        "backend": "kubernetes",
        "max_active_tasks": "0",
        "endpoint": "https://127.0.0.1:6443",
        "credentials_ref": "in-cluster",
        "k8s_default_cpu": "0.5",
        "options": "{}",
    }
    twice = errors_of(root.post(ADD, form | {"options": '{"default_resources": {"cpu": 2}}'}))
    assert "'default_resources' is set twice" in twice["options"][0]
    assert "k8s_default_memory_mb" in errors_of(root.post(ADD, form | {"k8s_default_memory_mb": "lots"}))
    response = root.post(ADD, form)
    assert response.status_code == 302, errors_of(response)
    connection = CloudConnection.objects.get(cloud_id="k3s-defaults")
    assert connection.options == {"default_resources": {"cpu": 0.5, "memory_mb": 1024}}
    page = root.get(f"/admin/clusters/cloudconnection/{connection.pk}/change/").content.decode()
    assert 'name="k8s_default_cpu"' in page and 'value="0.5"' in page and 'name="os_flavor"' not in page


# ---------------------------------------------------------------- dispatch: off until an admin turns it on, checked
def kubernetes(**fields) -> dict:
    """A connection to a port nothing listens on (loopback): every check fails at once."""
    return {
        "cloud_id": "k3s-new",
        "backend": "kubernetes",
        "max_active_tasks": "0",
        "endpoint": "https://127.0.0.1:9",
        "credentials_ref": "in-cluster",
        "options": "{}",
    } | fields


def test_a_new_connection_starts_with_dispatch_off(root, world):
    form = root.get(ADD).context["adminform"].form
    assert form["dispatch_enabled"].value() is False
    response = root.post(ADD, kubernetes())
    assert response.status_code == 302, errors_of(response)
    assert CloudConnection.objects.get(cloud_id="k3s-new").dispatch_enabled is False


def test_dispatch_comes_on_only_with_a_passing_check_or_the_audited_override(root, world):
    refused = errors_of(root.post(ADD, kubernetes(dispatch_enabled="on")))
    assert refused["dispatch_enabled"][0].startswith("cannot turn dispatch on: the connection's check fails: ")
    assert not CloudConnection.objects.filter(cloud_id="k3s-new").exists()

    response = root.post(ADD, kubernetes(dispatch_enabled="on", dispatch_override="on"))
    assert response.status_code == 302, errors_of(response)
    assert CloudConnection.objects.get(cloud_id="k3s-new").dispatch_enabled is True
    entries = AuditEntry.objects.filter(path=ADD).order_by("pk")
    assert [entry.details for entry in entries] == [{}, {"dispatch_override": "turned on without a passing check"}]


def test_dispatch_comes_on_for_a_connection_whose_check_passes(root, world):
    CloudConnection.objects.filter(pk=world.local.pk).update(dispatch_enabled=False)
    change = f"/admin/clusters/cloudconnection/{world.local.pk}/change/"
    form = {
        "cloud_id": "local",
        "name": world.local.name,
        "backend": "local",
        "dispatch_enabled": "on",
        "max_active_tasks": "0",
        "projects": [str(world.alpha.pk), str(world.beta.pk)],
        "endpoint": "",
        "scope": "",
        "credentials_ref": "",
        "options": json.dumps(world.local.options),
    }
    response = root.post(change, form)
    assert response.status_code == 302, errors_of(response)
    world.local.refresh_from_db()
    assert world.local.dispatch_enabled is True
    assert not AuditEntry.objects.filter(details__has_key="dispatch_override").exists()
