"""Query parameters and body fields hold to the types the schema states (found by schemathesis, issue 13)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("limit", ["null", "0", "501", "-1", "2.5", "abc", " "])
@pytest.mark.parametrize("path", ["/api/v1/tasks", "/api/v1/instances", "/api/v1/operations", "/api/v1/snapshots"])
def test_a_limit_outside_1_to_500_is_a_400_on_limit(api, path, limit):
    response = api("bob").get(path, {"limit": limit})
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == [{"field": "limit", "message": "a whole number from 1 to 500"}]


def test_a_limit_inside_is_the_page_size(api, make, world):
    for _ in range(3):
        make.submit(world.bob)
    assert len(api("bob").get("/api/v1/tasks", {"limit": "2"}).json()["results"]) == 2
    assert api("bob").get("/api/v1/tasks", {"limit": "500"}).status_code == 200


@pytest.mark.parametrize("query", ["state=", "state=RUNNING&cloud=", "stream="])
def test_a_parameter_without_a_value_is_a_400_naming_it_after_authentication(api, make, world, query):
    task = make.submit(world.bob)
    path = f"/api/v1/tasks/{task.pk}/logs" if query.startswith("stream") else "/api/v1/tasks"
    assert api(None).get(f"{path}?{query}").status_code == 401  # who you are first
    response = api("bob").get(f"{path}?{query}")
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [query.split("&")[-1].rstrip("=")]


@pytest.mark.parametrize(
    ("path", "method", "body", "field"),
    [
        ("/api/v1/tasks", "post", {"cloud": "local", "command": ["true"], "name": 0}, "name"),
        ("/api/v1/tasks", "post", {"cloud": "local", "command": ["true"], "retry_limit": "1"}, "retry_limit"),
        ("/api/v1/tasks", "post", {"cloud": "local", "command": ["true"], "retry_limit": True}, "retry_limit"),
        ("/api/v1/tokens", "post", {"name": 0}, "name"),
        ("/api/v1/email-preferences", "put", {"task_end": "all", "operation_failed": 0}, "operation_failed"),
        ("/api/v1/projects/alpha/secrets", "post", {"name": "db", "value": 0}, "value"),
        (
            "/api/v1/webhooks",
            "post",
            {"project": "alpha", "url": "https://93.184.215.14/", "event_types": [1]},
            "event_types.0",
        ),
    ],
)
def test_a_body_field_of_the_wrong_json_type_is_a_400_naming_it(api, path, method, body, field):
    response = getattr(api("alice"), method)(path, body, format="json")
    assert response.status_code == 400, response.content
    assert field in [e["field"] for e in response.json()["errors"]]


def test_yaml_numbers_are_not_strings_either(api):
    response = api("alice").post("/api/v1/tasks", "cloud: local\ncommand: [echo, 3]\n", content_type="application/yaml")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "command.1"
