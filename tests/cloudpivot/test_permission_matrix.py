"""Every API endpoint × role × own/other project, in one table.

The task under test belongs to bob (submitter in alpha). alice is alpha's admin, rita its
reader, charlie is only in beta; "anon" has no token. A foreign object answers 404, never
403, so ids cannot be probed.
"""

from __future__ import annotations

import pytest
from django.db import transaction

from tasks.services.attempts import attempt_close, attempt_create, current_attempt
from tasks.services.lifecycle import task_lock
from tasks.services.submission import task_submit
from tests.builders import hello_spec

ROLES = ["alice", "bob", "rita", "charlie", "anon"]

# (method, path, expected status for alice, bob, rita, charlie, anon)
MATRIX = [
    ("get", "/api/v1/tasks/{task}", [200, 200, 200, 404, 401]),
    ("get", "/api/v1/tasks/{task}/events", [200, 200, 200, 404, 401]),
    ("get", "/api/v1/tasks/{task}/logs", [200, 200, 200, 404, 401]),
    ("get", "/api/v1/tasks/{task}/attempts", [200, 200, 200, 404, 401]),
    ("post", "/api/v1/tasks/{task}/retry", [202, 202, 403, 404, 401]),
    ("post", "/api/v1/tasks/{alices_task}/retry", [202, 403, 403, 404, 401]),
    ("get", "/api/v1/tasks", [200, 200, 200, 200, 401]),
    ("post", "/api/v1/tasks", [201, 201, 403, 201, 401]),
    ("get", "/api/v1/clouds", [200, 200, 200, 200, 401]),
    ("get", "/api/v1/clouds/local", [200, 200, 200, 200, 401]),
    ("get", "/api/v1/clouds/hidden", [404, 404, 404, 404, 401]),
    ("get", "/api/v1/projects/alpha", [200, 200, 200, 404, 401]),
    ("get", "/api/v1/quotas", [200, 200, 200, 200, 401]),
    ("get", "/api/v1/tokens", [200, 200, 200, 200, 401]),
    ("get", "/runner/v1/assignment", [401, 401, 401, 401, 401]),  # user tokens never work here
]


@pytest.fixture
def objects(world):
    from clusters.models import CloudConnection

    CloudConnection.objects.create(cloud_id="hidden", backend="local")  # granted to nobody
    ids = {}
    for key, user in (("task", world.bob), ("alices_task", world.alice)):
        task, _ = task_submit(user=user, document=hello_spec())
        with transaction.atomic():
            attempt = attempt_create(task=task_lock(task.pk), reason="test")
            locked = task_lock(task.pk)
            attempt_close(task=locked, attempt=current_attempt(locked) or attempt, outcome="SUCCEEDED", reason="done")
        ids[key] = task.pk
    return ids


@pytest.mark.parametrize(("method", "path", "expected"), MATRIX, ids=[f"{m} {p}" for m, p, _ in MATRIX])
@pytest.mark.parametrize("role", ROLES)
def test_permission_matrix(api, world, objects, method, path, expected, role):
    client = api(None if role == "anon" else role)
    url = path.format(**objects)
    body = {"data": hello_spec(project="beta" if role == "charlie" else "alpha"), "format": "json"}
    response = getattr(client, method)(url, **(body if method == "post" and url.endswith("/tasks") else {}))
    assert response.status_code == expected[ROLES.index(role)], (role, method, url, response.content[:300])
