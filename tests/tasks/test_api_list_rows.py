"""The task list writes its rows by hand (TaskListSerializer, for speed): each row must equal what GET /tasks/{id}
(TaskSerializer) answers for the same task, and queue places must count every waiting task of the connection."""

from __future__ import annotations

from clusters.models import CloudConnection
from tests.builders import finished, hello_spec, submit


def test_each_list_row_equals_the_tasks_own_document(api, world, tmp_path):
    second = CloudConnection.objects.create(
        cloud_id="second", backend="local", options={"runs_dir": str(tmp_path / "second")}, dispatch_enabled=False
    )
    second.projects.add(world.alpha)
    done = finished(world.bob, name="done", exit_code=3)
    submit(world.charlie, name="theirs")  # beta's: not listed for bob, yet ahead of bob's in the local queue
    waiting = [submit(world.bob, name=f"w{i}", timeout_seconds=60 + i) for i in range(3)]
    elsewhere = [submit(world.bob, **hello_spec(name=f"s{i}", cloud="second")) for i in range(2)]
    client = api("bob")

    rows = client.get("/api/v1/tasks?limit=3").json()
    rows = rows["results"] + client.get(rows["next"]).json()["results"]

    assert [row["name"] for row in rows] == ["s1", "s0", "w2", "w1", "w0", "done"]
    for row in rows:
        assert row == client.get(f"/api/v1/tasks/{row['id']}").json()
    places = {row["name"]: row["queue_position"] for row in rows}
    assert places == {"s1": 2, "s0": 1, "w2": 4, "w1": 3, "w0": 2, "done": None}
    assert rows[-1]["exit_code"] == 3 and rows[-1]["result"] and rows[-1]["finished_at"].endswith("Z")
    assert {row["id"] for row in rows} >= {str(done.pk), *(str(t.pk) for t in waiting + elsewhere)}
    assert rows[0]["url"] == f"http://testserver/api/v1/tasks/{elsewhere[-1].pk}"


def test_a_filtered_list_of_waiting_tasks_keeps_their_places(api, world):
    for i in range(4):
        submit(world.bob, name=f"w{i}")
    rows = api("bob").get("/api/v1/tasks?state=PENDING&limit=2").json()["results"]
    assert [(row["name"], row["queue_position"]) for row in rows] == [("w3", 4), ("w2", 3)]
