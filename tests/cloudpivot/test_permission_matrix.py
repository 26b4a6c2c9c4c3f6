"""Every API endpoint × role × own/other project, in one table.

The task under test belongs to bob (submitter in alpha). alice is alpha's admin, rita its
reader, charlie is only in beta; "anon" has no token. A foreign object answers 404, never
403, so ids cannot be probed.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import override_settings

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
    # a debug hold: released by its task's owner or an admin (nothing held here: 409 for them)
    ("post", "/api/v1/tasks/{task}/release-hold", [409, 409, 403, 404, 401]),
    # project secrets: every member sees the names; only admins change them
    ("get", "/api/v1/projects/alpha/secrets", [200, 200, 200, 404, 401]),
    ("delete", "/api/v1/projects/alpha/secrets/db", [204, 403, 403, 404, 401]),
    # webhooks: the project's admins only
    ("get", "/api/v1/webhooks/{webhook}", [200, 404, 404, 404, 401]),
    ("get", "/api/v1/webhooks/{webhook}/deliveries", [200, 404, 404, 404, 401]),
    ("post", "/api/v1/webhooks/{webhook}/rotate-secret", [200, 404, 404, 404, 401]),
    # the feed and usage: each sees their own projects' (the answer's content is tested where they live)
    ("get", "/api/v1/events", [200, 200, 200, 200, 401]),
    ("get", "/api/v1/usage", [200, 200, 200, 200, 401]),
    # SSH keys: one's own only
    ("get", "/api/v1/ssh-keys/{bobs_key}", [404, 200, 404, 404, 401]),
    ("delete", "/api/v1/ssh-keys/{bobs_key}", [404, 204, 404, 404, 401]),
    # instances, snapshots, operations, kept volumes: the project's (docs/security.md)
    ("get", "/api/v1/instances/{instance}", [200, 200, 200, 404, 401]),
    ("get", "/api/v1/instances/{instance}/operations", [200, 200, 200, 404, 401]),
    ("get", "/api/v1/snapshots/{snapshot}", [200, 200, 200, 404, 401]),
    ("get", "/api/v1/operations/{operation}", [200, 200, 200, 404, 401]),
    ("get", "/api/v1/volumes/{volume}", [200, 200, 200, 404, 401]),
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
    return ids | _resources(world)


def _resources(world) -> dict:
    """A secret and a webhook of alpha, bob's SSH key, and an instance of alpha with a snapshot, an operation
    and a kept volume (rows: no cloud is asked to read them)."""
    import subprocess

    from cloudpivot.accounts.project_secrets import secret_create
    from cloudpivot.accounts.ssh_keys import ssh_key_create
    from notifications.webhooks import webhook_endpoint_create
    from resources.models import KeptVolume
    from tests.builders import instance_row, operation_failed, snapshot_row

    secret_create(user=world.alice, project=world.alpha, name="db", value="pa55")
    with override_settings(WEBHOOK_ALLOW_PRIVATE_TARGETS=True):
        webhook, _ = webhook_endpoint_create(
            user=world.alice, project="alpha", url="http://127.0.0.1:9/h", event_types=[]
        )
    key_file = world.runs_dir.parent / "bob-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key_file)], check=True, timeout=30)
    key = ssh_key_create(user=world.bob, name="laptop", public_key=key_file.with_suffix(".pub").read_text())
    instance = instance_row(connection=world.local, project=world.alpha, owner=world.bob)
    snapshot = snapshot_row(connection=world.local, project=world.alpha, owner=world.bob, instance=instance)
    operation = operation_failed(instance=instance, user=world.bob)
    volume = KeptVolume.objects.create(
        project=world.alpha, connection=world.local, instance=instance, ref="pvc/data", size_gb=1
    )
    return {
        "webhook": webhook.pk,
        "bobs_key": key.pk,
        "instance": instance.pk,
        "snapshot": snapshot.pk,
        "operation": operation.pk,
        "volume": volume.pk,
    }


@pytest.mark.parametrize(("method", "path", "expected"), MATRIX, ids=[f"{m} {p}" for m, p, _ in MATRIX])
@pytest.mark.parametrize("role", ROLES)
def test_permission_matrix(api, world, objects, method, path, expected, role):
    client = api(None if role == "anon" else role)
    url = path.format(**objects)
    body = {"data": hello_spec(project="beta" if role == "charlie" else "alpha"), "format": "json"}
    response = getattr(client, method)(url, **(body if method == "post" and url.endswith("/tasks") else {}))
    assert response.status_code == expected[ROLES.index(role)], (role, method, url, response.content[:300])
