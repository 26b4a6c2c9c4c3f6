"""Debug hold refusals that need no cloud: bad values, the `local` cloud, the connection option's shape, and the
submit form's field (shown only where the cloud allows holds). Holds themselves: tests/clusters (kmock) and
tests/openstack (the development OpenStack)."""

from __future__ import annotations

import pytest

from clusters.connection_options import option_errors
from clusters.models import CloudConnection
from tasks.models import Task

pytestmark = pytest.mark.django_db


def post(client, document):
    return client.post("/api/v1/tasks", document, format="json")


@pytest.mark.parametrize("value", [-1, "ten", 1.5, 7 * 24 * 60 + 1, [5]], ids=repr)
def test_a_bad_value_is_a_400_on_the_field(api, value):
    response = post(api("bob"), {"cloud": "local", "command": ["false"], "debug_hold_minutes": value})
    assert response.status_code == 400, response.json()
    assert response.json()["errors"][0]["field"] == "debug_hold_minutes"
    assert not Task.objects.exists()


def test_the_local_cloud_refuses_a_hold_and_says_why(api):
    response = post(api("bob"), {"cloud": "local", "command": ["false"], "debug_hold_minutes": 5})
    assert response.status_code == 400, response.json()
    error = response.json()["errors"][0]
    assert error["field"] == "debug_hold_minutes"
    assert error["message"].startswith("debug holds are not allowed on local: a local task is a process")


def test_the_local_cloud_refuses_even_with_the_option_set(api, world):
    world.local.options = world.local.options | {"debug_hold_max_minutes": 30}  # not a local option either
    assert option_errors("local", world.local.options)[0][0] == "debug_hold_max_minutes"
    CloudConnection.objects.filter(pk=world.local.pk).update(options=world.local.options)
    response = post(api("bob"), {"cloud": "local", "command": ["false"], "debug_hold_minutes": 5})
    assert response.status_code == 400
    assert "not allowed on local" in response.json()["errors"][0]["message"]


def test_zero_is_no_hold_and_is_accepted_everywhere(api):
    response = post(api("bob"), {"cloud": "local", "command": ["true"], "debug_hold_minutes": 0})
    assert response.status_code == 201, response.json()


@pytest.mark.parametrize("backend", ["kubernetes", "openstack"])
def test_the_connection_option_is_a_whole_number(backend):
    assert option_errors(backend, {"debug_hold_max_minutes": 30}) == []
    for bad in (-1, "30", 1.5, True):
        errors = option_errors(backend, {"debug_hold_max_minutes": bad})
        assert errors and errors[0][0] == "debug_hold_max_minutes", bad


def test_the_submit_form_offers_the_field_only_where_holds_are_allowed(pages, world, kube, kube_connection):
    page = pages("bob").get("/tasks/new?cloud=k3s-lab")
    assert 'name="form-debug_hold_minutes"' not in page.content.decode()
    kube_connection.options = kube_connection.options | {"debug_hold_max_minutes": 45}
    kube_connection.save()
    page = pages("bob").get("/tasks/new?cloud=k3s-lab")
    text = page.content.decode()
    assert 'name="form-debug_hold_minutes"' in text and "At most 45 on this cloud." in text
