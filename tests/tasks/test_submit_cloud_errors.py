"""A cloud error while a task is submitted is answered by the API's one table (cloudpivot.exceptions.cloud_error),
never a 500."""

from __future__ import annotations

from clusters.models import CloudConnection
from tasks.models import Task


def test_a_connection_whose_backend_this_version_lacks_is_a_400_on_cloud(api, world):
    retired = CloudConnection.objects.create(cloud_id="old-grid", backend="slurm")  # a kind no longer shipped
    retired.projects.add(world.alpha)
    response = api("bob").post("/api/v1/tasks", {"cloud": "old-grid", "command": ["true"]}, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid"
    assert body["errors"] == [{"field": "cloud", "message": "the slurm backend is not available in this version"}]
    assert not Task.objects.exists()
