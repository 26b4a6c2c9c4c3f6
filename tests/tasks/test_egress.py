"""A task's `network` and its connection's `egress` policy (clusters/egress.py, docs/security.md#egress): bad
destinations are a 400 naming the entry, what the cloud cannot close is a 400 naming `network`, and the effective
egress is kept once in the spec and shown by the API (detail and list) and the task page. Each cloud's closing:
tests/clusters/test_kubernetes_egress.py, tests/runner_api/test_agent_egress.py."""

from __future__ import annotations

import pytest

from clusters.connection_options import option_errors
from clusters.egress import destinations_normalize, effective_egress
from clusters.models import CloudConnection
from tasks.models import Task

pytestmark = pytest.mark.django_db


def post(client, document):
    return client.post("/api/v1/tasks", document, format="json")


@pytest.mark.parametrize(
    ("network", "field", "words"),
    [
        ("all", "network", 'must be "none", "default" or a list'),
        ([], "network", 'write "none"'),
        (["10.0.0.0/8", "example.org:443"], "network.1", "host names are not accepted"),
        (["10.0.0.1/8"], "network.0", "write the network, e.g. 10.0.0.0/8"),
        (["10.0.0.0/8:70000"], "network.0", "the port must be 1 to 65535"),
        (["2001:db8::/32:443"], "network.0", "[2001:db8::/32]:443"),
        (["10.0.0.0/8", 5], "network.1", "must be a destination string"),
        ({"allow": "all"}, "network", 'must be "none", "default" or a list'),
    ],
    ids=repr,
)
def test_a_bad_network_is_a_400_naming_the_entry(api, world, network, field, words):
    response = post(api("bob"), {"cloud": "local", "command": ["true"], "network": network})
    assert response.status_code == 400, response.json()
    error = response.json()["errors"][0]
    assert error["field"] == field and words in error["message"], error
    assert not Task.objects.exists()


def test_destinations_come_back_normalized():
    assert destinations_normalize(["192.0.2.7", "10.0.0.0/8:443", "[2001:db8::/32]:53", "192.0.2.7/32"]) == (
        ["192.0.2.7/32", "10.0.0.0/8:443", "[2001:db8::/32]:53"],
        {},
    )


def test_the_effective_egress_is_what_the_task_asked_within_the_policy():
    closed = {"egress": {"default": "none", "allow": ["10.0.0.0/8", "192.0.2.0/24:443"]}}
    assert effective_egress(None, closed) == ("none", [])
    assert effective_egress("default", closed) == ("none", [])
    assert effective_egress("none", {}) == ("none", [])
    assert effective_egress("default", {}) == ("open", [])
    assert effective_egress(["10.1.0.0/16:5432", "192.0.2.9/32:443"], closed) == (
        ["10.1.0.0/16:5432", "192.0.2.9/32:443"],
        [],
    )
    assert effective_egress(["192.0.2.9/32:22", "0.0.0.0/0"], closed)[1] == ["192.0.2.9/32:22", "0.0.0.0/0"]
    assert effective_egress(["203.0.113.0/24"], {"egress": {"default": "open"}}) == (["203.0.113.0/24"], [])


@pytest.mark.parametrize("backend", ["local", "kubernetes", "openstack"])
def test_the_connection_policy_is_checked_when_saved(backend):
    assert option_errors(backend, {"egress": {"default": "none", "allow": ["10.0.0.0/8:443"]}}) == []
    assert option_errors(backend, {"egress": {}}) == []
    for bad, words in (
        ("none", "must be an object"),
        ({"default": "closed"}, "'egress.default' must be"),
        ({"allow": ["10.0.0.0/8", "db.example.org"]}, "'egress.allow' entry 1"),
        ({"deny": []}, "unknown key 'deny'"),
    ):
        errors = option_errors(backend, {"egress": bad})
        assert errors and errors[0][0] == "egress" and words in errors[0][1], (bad, errors)


def test_local_refuses_a_list_of_destinations(api, world):
    response = post(api("bob"), {"cloud": "local", "command": ["true"], "network": ["10.0.0.0/8"]})
    assert response.status_code == 400, response.json()
    error = response.json()["errors"][0]
    assert error["field"] == "network"
    assert "cannot allow a list of destinations" in error["message"], error


def test_without_a_policy_the_egress_is_open_and_shown(api, pages, world):
    response = post(api("bob"), {"cloud": "local", "command": ["true"]})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["egress"] == "open" and body["spec"]["egress"] == "open"
    assert api("bob").get(f"/api/v1/tasks/{body['id']}").json()["egress"] == "open"
    rows = api("bob").get("/api/v1/tasks").json()["results"]
    assert [row["egress"] for row in rows] == ["open"]
    page = pages("bob").get(f"/tasks/{body['id']}/").content.decode()
    assert "open: the cloud&#x27;s own network, not restricted by CloudPivot" in page


def test_a_task_from_before_egress_reads_as_open(api, world):
    body = post(api("bob"), {"cloud": "local", "command": ["true"]}).json()
    task = Task.objects.get(pk=body["id"])
    Task.objects.filter(pk=task.pk).update(normalized={k: v for k, v in task.normalized.items() if k != "egress"})
    assert api("bob").get(f"/api/v1/tasks/{task.pk}").json()["egress"] == "open"
    assert api("bob").get("/api/v1/tasks").json()["results"][0]["egress"] == "open"


def test_the_connections_default_closes_a_local_task_that_asks_nothing(api, world):
    CloudConnection.objects.filter(pk=world.local.pk).update(
        options=world.local.options | {"egress": {"default": "none"}}
    )
    response = post(api("bob"), {"cloud": "local", "command": ["true"], "network": "default"})
    assert response.status_code == 201, response.json()
    assert response.json()["egress"] == "none"
