"""POST /api/v1/tasks: validation, idempotency, binding to project and connection."""

from __future__ import annotations

import json

import pytest

from tasks.models import Task
from tests.builders import hello_spec

URL = "/api/v1/tasks"


def post(client, body, **headers):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(URL, data=data, content_type="application/json", **headers)


def test_it_creates_a_pending_task_bound_to_its_connection_and_project(api, world):
    response = post(api("bob"), hello_spec(name="greeting"))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "PENDING" and body["cloud"] == "local" and body["project"] == "alpha"
    assert body["owner"] == "bob" and body["name"] == "greeting"
    assert body["spec"]["command"] == ["python3", "-c", "print('hello')"]
    assert response["Location"] == f"/api/v1/tasks/{body['id']}"
    task = Task.objects.get(pk=body["id"])
    assert task.backend == "local" and task.events.get().type == "submitted"


def test_it_accepts_yaml(api, world):
    body = "cloud: local\ncommand: [echo, hi]\n"
    response = api("bob").post(URL, data=body, content_type="application/yaml")
    assert response.status_code == 201, response.json()
    assert response.json()["spec"]["command"] == ["echo", "hi"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cloud": "local"}, "command"),
        ({"cloud": "local", "command": "echo hello"}, "command"),
        ({"cloud": "local", "command": ["echo", 3]}, "command.1"),
        ({"cloud": "local", "command": []}, "command"),
        ({"cloud": "mars", "command": ["true"]}, "cloud"),
        ({"cloud": "local", "command": ["true"], "image": "python:3.12"}, "image"),
        ({"cloud": "local", "command": ["true"], "timeout_seconds": -5}, "timeout_seconds"),
        ({"cloud": "local", "command": ["true"], "retry_limit": "many"}, "retry_limit"),
        ({"cloud": "local", "command": ["true"], "stop_grace_seconds": 7200}, "stop_grace_seconds"),
        ({"cloud": "local", "command": ["true"], "on_interrupt": "pray"}, "on_interrupt"),
        ({"cloud": "local", "command": ["true"], "interrupt_limit": 21}, "interrupt_limit"),
        ({"cloud": "local", "command": ["true"], "env": {"1BAD": "x"}}, "env"),
        ({"cloud": "local", "command": ["true"], "comand": ["typo"]}, "comand"),
        ({"command": ["true"]}, "cloud"),
        ({"cloud": "local", "command": ["true"], "project": "nope"}, "project"),
        ({"cloud": "local", "command": ["true"], "project": "beta"}, "project"),
        ([1, 2], ""),
    ],
)
def test_it_rejects_an_invalid_spec_naming_the_field(api, world, body, field):
    response = post(api("bob"), body)
    assert response.status_code == 400, response.json()
    error = response.json()
    assert error["code"] == "invalid"
    assert field in [e["field"] for e in error["errors"]], error
    assert error["message"]
    assert Task.objects.count() == 0


def test_it_rejects_malformed_json(api, world):
    response = post(api("bob"), '{"cloud": "local", "command": [')
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"
    assert Task.objects.count() == 0


def test_it_rejects_a_2_mb_body_with_413(api, world):
    body = hello_spec(env={"BIG": "x" * (2 * 1024 * 1024)})
    response = post(api("bob"), body)
    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"
    assert "too large" in response.json()["errors"][0]["message"]
    assert Task.objects.count() == 0


def test_a_body_over_djangos_upload_limit_is_a_413_in_the_error_shape(api, world, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = api("bob").post("/api/v1/instances", {"name": "x" * 5000}, format="json")
    assert response.status_code == 413, response.content[:200]
    assert response.json()["code"] == "request_too_large"
    assert "at most 1000 bytes" in response.json()["message"]


def test_same_idempotency_key_and_body_give_the_same_task(api, world):
    client = api("bob")
    first = post(client, hello_spec(), HTTP_IDEMPOTENCY_KEY="order-17")
    # Same document, other key order and whitespace: still the same body.
    again = post(
        client,
        '{"command": ["python3", "-c", "print(\'hello\')"],   "cloud": "local"}',
        HTTP_IDEMPOTENCY_KEY="order-17",
    )
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["id"] == again.json()["id"]
    assert again["Idempotent-Replayed"] == "true"
    assert Task.objects.count() == 1


def test_same_idempotency_key_with_another_body_is_a_conflict(api, world):
    client = api("bob")
    post(client, hello_spec(), HTTP_IDEMPOTENCY_KEY="order-18")
    response = post(client, hello_spec(name="other"), HTTP_IDEMPOTENCY_KEY="order-18")
    assert response.status_code == 409
    assert response.json()["code"] == "idempotency_key_reused"
    assert Task.objects.count() == 1


def test_idempotency_keys_are_scoped_to_the_user_not_the_token(api, world):
    from cloudpivot.accounts.services import api_token_create

    first = post(api("bob"), hello_spec(), HTTP_IDEMPOTENCY_KEY="k1")
    _, rotated = api_token_create(user=world.bob, name="rotated")
    client = api(None)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {rotated}")
    again = post(client, hello_spec(), HTTP_IDEMPOTENCY_KEY="k1")
    assert again.json()["id"] == first.json()["id"]
    other_user = post(api("charlie"), hello_spec(), HTTP_IDEMPOTENCY_KEY="k1")
    assert other_user.status_code == 201 and other_user.json()["id"] != first.json()["id"]


def test_a_reader_cannot_submit(api, world):
    response = post(api("rita"), hello_spec())
    assert response.status_code == 403
    assert response.json() == {
        "code": "permission_denied",
        "message": "none of your projects lets you submit to local",
        "errors": [],
    }
    named = post(api("rita"), hello_spec(project="alpha"))  # naming her project: told her role is the reason
    assert named.status_code == 403
    assert named.json()["message"] == "your role in alpha is reader; submitting needs submitter or admin"
    assert Task.objects.count() == 0
    assert post(api("bob"), hello_spec()).status_code == 201  # a submitter of the same project may


def test_a_user_with_several_projects_must_name_one(api, world):
    from cloudpivot.accounts.models import Membership, Role

    Membership.objects.create(project=world.beta, user=world.bob, role=Role.SUBMITTER)
    response = post(api("bob"), hello_spec())
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "project"
    assert post(api("bob"), hello_spec(project="beta")).json()["project"] == "beta"


def test_it_requires_authentication(api, world):
    response = post(api(None), hello_spec())
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_it_refuses_a_revoked_token(api, world):
    from cloudpivot.accounts.models import ApiToken
    from cloudpivot.accounts.services import api_token_revoke

    api_token_revoke(token=ApiToken.objects.get(user=world.bob))
    response = post(api("bob"), hello_spec())
    assert response.status_code == 401
    assert "revoked" in response.json()["message"]


def test_a_token_used_a_moment_ago_is_refused_at_once_when_revoked_here(api, world):
    """The token is cached for a second per process; a revocation in this process empties the cache."""
    from cloudpivot.accounts.models import ApiToken
    from cloudpivot.accounts.services import api_token_revoke

    assert api("bob").get(URL).status_code == 200  # the token is now cached
    api_token_revoke(token=ApiToken.objects.get(user=world.bob))
    assert api("bob").get(URL).status_code == 401


def test_a_revocation_made_elsewhere_takes_effect_within_the_cache_time(api, world, settings):
    """Another process revokes (here: an UPDATE that sends no signal): refused once the cache time passed."""
    import time

    from django.utils import timezone

    from cloudpivot.accounts.models import ApiToken

    settings.API_TOKEN_CACHE_SECONDS = 0.5
    assert api("bob").get(URL).status_code == 200
    ApiToken.objects.filter(user=world.bob).update(revoked_at=timezone.now())
    time.sleep(0.6)
    response = api("bob").get(URL)
    assert response.status_code == 401 and "revoked" in response.json()["message"]


def test_a_deactivated_user_is_refused_at_once(api, world):
    assert api("bob").get(URL).status_code == 200
    world.bob.is_active = False
    world.bob.save(update_fields=["is_active"])
    assert api("bob").get(URL).status_code == 401


def test_it_refuses_a_runner_credential_on_the_user_api(api, world):
    client = api(None)
    client.credentials(HTTP_AUTHORIZATION="Bearer cpr_abcdefghijklmnopqrstuvwxyz")
    response = client.get(URL)
    assert response.status_code == 401
    assert "runner credentials are not accepted" in response.json()["message"]


def test_an_unknown_key_in_resources_is_refused_like_any_unknown_field(api, world):
    response = post(api("bob"), hello_spec(resources={"cpus": 2}))
    assert response.status_code == 400
    assert response.json()["errors"] == [{"field": "resources.cpus", "message": "unknown field"}]
