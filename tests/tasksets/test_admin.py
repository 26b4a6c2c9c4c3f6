"""The sets' admin: read-only, each set's progress on the list in one query for the page, not one per set."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.tasksets.helpers import materialize, post_set, run_open_elements, template


@pytest.fixture
def root(client, world):
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.org", "pw"))
    return client


def test_the_list_shows_each_sets_progress_in_a_constant_number_of_queries(api, world, root):
    first = post_set(api("bob"), {"template": template(), "count": 3, "max_running": 2}).json()
    materialize()
    run_open_elements(exit_codes={1: 1})
    response = root.get("/admin/tasksets/taskset/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "1 waiting, 1 failed, 1 succeeded" in page
    with CaptureQueriesContext(connection) as few:
        root.get("/admin/tasksets/taskset/")
    for n in range(5):
        post_set(api("charlie"), {"template": template(), "count": 10 + n})
    with CaptureQueriesContext(connection) as more:
        page = root.get("/admin/tasksets/taskset/").content.decode()
    assert len(more) == len(few)
    assert "14 waiting" in page
    change = root.get(f"/admin/tasksets/taskset/{first['id']}/change/")
    assert change.status_code == 200 and "1 waiting, 1 failed, 1 succeeded" in change.content.decode()


def test_it_is_read_only(api, world, root):
    created = post_set(api("bob"), {"template": template(), "count": 2}).json()
    assert root.get("/admin/tasksets/taskset/add/").status_code == 403
    assert root.post(f"/admin/tasksets/taskset/{created['id']}/change/", {"name": "x"}).status_code == 403
    assert root.post(f"/admin/tasksets/taskset/{created['id']}/delete/", {"post": "yes"}).status_code == 403
